/**
 * Federation's directives as a subgraph schema carries them: the names they go by (`@key`,
 * Federation 2's namespaced `@federation__key`, an alias a `@link` import gives), and the
 * top-level fields of their field sets. `@key` keys a cached entity (./entities); `@requires` on a
 * @cached field says which other fields of its parent its value depends on (./directive keys the
 * field with them).
 */
import type {
  ConstDirectiveNode,
  ConstListValueNode,
  ConstObjectValueNode,
  ConstValueNode,
  GraphQLField,
  GraphQLObjectType,
  GraphQLSchema,
  StringValueNode,
} from 'graphql';
import { findDirective } from './directive-nodes';
import { encodeFields } from './keys';
import { propertyOf } from './schema-reading';

/**
 * The names `@<directive>` goes by in `schema`: `directive`, `federation__<directive>` (a `@link`
 * that does not import it), `<as>__<directive>` when the Federation `@link` renames its namespace
 * (`@link(url: "https://specs.apollo.dev/federation/v2.3", as: "fed")`: `@fed__key`), and an alias
 * a `@link(import: [{ name: "@…", as: "@…" }])` gives it.
 */
export function federationNames(schema: GraphQLSchema, directive: 'key' | 'requires'): Set<string> {
  const names = new Set([directive, `federation__${directive}`]);
  for (const node of [schema.astNode, ...schema.extensionASTNodes]) {
    for (const link of node?.directives ?? []) {
      if (link.name.value !== 'link') continue;
      const namespace = stringNamed(link.arguments, 'as');
      if (namespace !== undefined && /\/federation\/v\d/.test(stringNamed(link.arguments, 'url') ?? ''))
        names.add(`${namespace}__${directive}`);
      const imports = link.arguments?.find((argument) => argument.name.value === 'import')?.value;
      if (imports?.kind !== ('ListValue' as string)) continue;
      for (const item of (imports as ConstListValueNode).values) {
        if (item.kind !== ('ObjectValue' as string)) continue;
        const fields = (item as ConstObjectValueNode).fields;
        const as = stringNamed(fields, 'as');
        if (stringNamed(fields, 'name') === `@${directive}` && as?.startsWith('@') === true) names.add(as.slice(1));
      }
    }
  }
  return names;
}

/** The string given as `name` among a directive's arguments or an object's fields, if a string. */
function stringNamed(
  given: readonly { readonly name: { readonly value: string }; readonly value: ConstValueNode }[] | undefined,
  name: string,
): string | undefined {
  const value = given?.find((one) => one.name.value === name)?.value;
  return value?.kind === ('StringValue' as string) ? (value as StringValueNode).value : undefined;
}

/** The top-level field names of each @key on `type` (`"id"` → ["id"], `"id org { id }"` → ["id", "org"]). */
export function keyFieldSets(type: GraphQLObjectType, names: ReadonlySet<string>): string[][] {
  const nodes = [type.astNode, ...type.extensionASTNodes].flatMap((node) =>
    (node?.directives ?? []).filter((directive) => names.has(directive.name.value)),
  );
  if (nodes.length === 0)
    for (const name of names) {
      const found = findDirective(type, name, type.name);
      if (found !== undefined) nodes.push(found);
    }
  const sets: string[][] = [];
  for (const node of nodes) {
    const top = topLevelFields(node);
    if (top.length > 0) sets.push(top);
  }
  return sets;
}

/**
 * How a type's objects are identified when the transform's `identity` names nothing for it: `id`,
 * unless the type is a Federation entity whose keys need more than `id`. Then the fields of its
 * first key with `id` (`@key(fields: "id locale")`), or of its first key when it has no `id`
 * field, as `canonicalArgs` encodes them (`{"id":"1","locale":"en"}`): by `id` alone, the value
 * computed for one locale was served for the others. An object lacking one of them has no
 * identity (resolved uncached). A type keyed by other fields that also has an `id` keeps `id`.
 */
export function defaultIdentity(schema: GraphQLSchema, type: GraphQLObjectType): (parent: any) => unknown {
  const keys = keyFieldSets(type, federationNames(schema, 'key'));
  if (keys.length === 0 || keys.some((key) => key.length === 1 && key[0] === 'id')) return propertyOf('id');
  const key = keys.find((fields) => fields.includes('id')) ?? (type.getFields().id === undefined ? keys[0] : undefined);
  if (key === undefined) return propertyOf('id');
  const names = [...new Set(key)];
  return (parent: object) => encodeFields(parent, names, true);
}

/**
 * The parent fields a `@requires(fields: "…")` on `field` names, top-level (`"weight dimensions {
 * depth }"` → ["weight", "dimensions"]); none when it has no @requires.
 */
export function requiredFields(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  coordinate: string,
): string[] {
  const required = new Set<string>();
  // From its AST node (SDL) or its extensions (a schema built in code), as @cached is read.
  for (const name of federationNames(schema, 'requires')) {
    const node = findDirective(field, name, coordinate);
    if (node !== undefined) for (const top of topLevelFields(node)) required.add(top);
  }
  return [...required].sort();
}

/** The top-level field names of a directive's `fields` field set. */
function topLevelFields(node: ConstDirectiveNode): string[] {
  const value = node.arguments?.find((argument) => argument.name.value === 'fields')?.value;
  const fields = value?.kind === ('StringValue' as string) ? (value as StringValueNode).value : undefined;
  if (fields === undefined) return [];
  const top: string[] = [];
  let depth = 0;
  for (const token of fields.match(/[_A-Za-z][_0-9A-Za-z]*|[{}]/g) ?? []) {
    if (token === '{') depth++;
    else if (token === '}') depth--;
    else if (depth === 0) top.push(token);
  }
  return top;
}
