/**
 * Where a schema element's directives are: in its AST node (and a type's `extend type` nodes) when
 * the schema was built from SDL (buildSchema, makeExecutableSchema, buildSubgraphSchema, NestJS's
 * `@Directive('@cached(…)')`), or
 * in `extensions.directives` when it was built in code (graphql-tools' and Pothos' convention).
 * Both are read here, as AST nodes, so one validation path serves both and its messages quote the
 * value as given.
 *
 * The forms of `extensions.directives` in use:
 * - an object by directive name: `{ cached: { ttl: 60 } }`, or `{ cached: [{ ttl: 60 }] }` (a list
 *   of argument objects, one per use: graphql-tools' getDirectivesInExtensions, Pothos with
 *   `useGraphQLToolsUnorderedDirectives`);
 * - a list of uses: `[{ name: 'cached', args: { ttl: 60 } }]` (Pothos' default).
 * The AST wins when both name the directive (Pothos writes both, from the same values).
 *
 * Only types are imported from graphql: kinds are written as their string values.
 */
import type { ConstArgumentNode, ConstDirectiveNode, ConstObjectFieldNode, ConstValueNode } from 'graphql';
import { HerdcacheError } from '../core/errors';

/** herdcache's directives: not repeatable. */
const OWN_DIRECTIVES: ReadonlySet<string> = new Set(['cached', 'invalidates']);

/** A type or a field: what carries directives. */
export interface Annotated {
  readonly astNode?: { readonly directives?: readonly ConstDirectiveNode[] | undefined } | null | undefined;
  /** A type's `extend type` nodes (Federation 1 entities are declared so): their directives count too. */
  readonly extensionASTNodes?: readonly { readonly directives?: readonly ConstDirectiveNode[] | undefined }[];
  readonly extensions?: unknown;
}

/** The first use of directive `name` on `element`, from its AST node or its extensions. */
export function findDirective(element: Annotated, name: string, coordinate: string): ConstDirectiveNode | undefined {
  const node = element.astNode?.directives?.find((directive) => directive.name.value === name);
  if (node !== undefined) return node;
  for (const extension of element.extensionASTNodes ?? []) {
    const extended = extension.directives?.find((directive) => directive.name.value === name);
    if (extended !== undefined) return extended;
  }
  const extensions = element.extensions as { directives?: unknown } | null | undefined;
  const directives = extensions?.directives;
  if (directives === undefined || directives === null || typeof directives !== 'object') return undefined;
  let args: unknown;
  let uses: number;
  if (Array.isArray(directives)) {
    const named = directives.filter(
      (item) => item !== null && typeof item === 'object' && (item as { name?: unknown }).name === name,
    ) as { args?: unknown }[];
    if (named.length === 0) return undefined;
    uses = named.length;
    args = named[0]!.args ?? {};
  } else {
    if (!Object.hasOwn(directives, name)) return undefined;
    args = (directives as Record<string, unknown>)[name];
    uses = 1;
    if (Array.isArray(args)) {
      if (args.length === 0) return undefined;
      uses = args.length;
      args = args[0];
    }
    args ??= {};
  }
  // herdcache's own directives are not repeatable (SDL refuses a second use): a second entry in
  // code would be dropped unseen, its scope with it.
  if (uses > 1 && OWN_DIRECTIVES.has(name)) {
    throw new HerdcacheError(
      'E_INVALID_ARGUMENT',
      `herdcache: @${name} on ${coordinate} is given ${uses} times in extensions.directives: it is not repeatable, give one`,
    );
  }
  if (typeof args !== 'object' || Array.isArray(args)) {
    throw new HerdcacheError(
      'E_INVALID_ARGUMENT',
      `herdcache: @${name} on ${coordinate}: extensions.directives.${name} must be an object of arguments, got ${JSON.stringify(args) ?? String(args)}`,
    );
  }
  return directiveNode(name, args as Record<string, unknown>);
}

function directiveNode(name: string, args: Record<string, unknown>): ConstDirectiveNode {
  const argumentNodes: ConstArgumentNode[] = [];
  for (const [argName, value] of Object.entries(args)) {
    // An argument given as undefined is an argument not given (as graphql-js' astFromValue does).
    if (value === undefined) continue;
    argumentNodes.push({
      kind: 'Argument',
      name: nameNode(argName),
      value: valueNode(value),
    } as unknown as ConstArgumentNode);
  }
  return { kind: 'Directive', name: nameNode(name), arguments: argumentNodes } as unknown as ConstDirectiveNode;
}

function nameNode(value: string): { kind: 'Name'; value: string } {
  return { kind: 'Name', value };
}

/**
 * A JS value as the AST node SDL would have for it. Enum values arrive as their internal values
 * (strings: CacheScope's are 'PUBLIC' and 'PRIVATE'), so a string stays a StringValue and the
 * readers accept it where an enum is expected.
 */
function valueNode(value: unknown): ConstValueNode {
  let node: unknown;
  if (value === null) node = { kind: 'NullValue' };
  else if (typeof value === 'number')
    node = Number.isInteger(value)
      ? { kind: 'IntValue', value: String(value) }
      : { kind: 'FloatValue', value: String(value) };
  else if (typeof value === 'bigint') node = { kind: 'IntValue', value: value.toString() };
  else if (typeof value === 'string') node = { kind: 'StringValue', value };
  else if (typeof value === 'boolean') node = { kind: 'BooleanValue', value };
  else if (Array.isArray(value)) node = { kind: 'ListValue', values: value.map(valueNode) };
  else if (typeof value === 'object') {
    const fields: ConstObjectFieldNode[] = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .map(
        ([key, item]) =>
          ({ kind: 'ObjectField', name: nameNode(key), value: valueNode(item) }) as unknown as ConstObjectFieldNode,
      );
    node = { kind: 'ObjectValue', fields };
  } else node = { kind: 'StringValue', value: String(value) }; // a function or a symbol: refused by the readers as a non-number, non-enum
  return node as ConstValueNode;
}
