/**
 * Tag templates of `@cached(tags:)` and `@invalidates(tags:)`: "User:{id}", "Post:{args.postId}",
 * "User:{result.author.id}". Parsed and checked once, at schema build; filled per call.
 *
 * A tag must be known BEFORE the fill (a function of the key: the parent, the arguments), never of
 * the value being cached: that is what lets the registry abandon a fill an invalidation raced, and
 * lets a versioned store record the tag's version before the value is computed. So @cached has no
 * `{result}`; only @invalidates, which runs after its mutation, reads the mutation's result.
 *
 * Filled values are not escaped: two tags that collide ("a:b" + "c" vs "a" + "b:c") only make an
 * invalidation drop a little more than it had to, never serve a wrong value.
 *
 * Only types are imported from graphql (an optional peer): kinds are read from Symbol.toStringTag.
 */
import type {
  ConstListValueNode,
  ConstValueNode,
  GraphQLArgument,
  GraphQLField,
  GraphQLInputType,
  GraphQLOutputType,
  StringValueNode,
} from 'graphql';
import { HerdcacheError } from '../core/errors';

/** Where a placeholder's value comes from. */
type Root = 'args' | 'parent' | 'result';

interface Placeholder {
  /** As written, braces included: "{args.id}". */
  readonly text: string;
  readonly root: Root;
  /** Property names below the root; empty for `{result}` itself. */
  readonly path: readonly string[];
}

/** A template, parsed: literal parts around the placeholders (literals.length = placeholders.length + 1). */
export interface TagTemplate {
  readonly source: string;
  readonly literals: readonly string[];
  readonly placeholders: readonly Placeholder[];
}

/** What a placeholder is filled from, per call. */
export interface TagValues {
  readonly args: unknown;
  readonly parent?: unknown;
  readonly result?: unknown;
}

/** A template one of whose placeholders had no usable value in a call. */
export class UnfilledTag {
  constructor(
    readonly template: string,
    readonly placeholder: string,
    /** Why, for messages: `got null`, `got a list of 3 with a non-scalar`… */
    readonly got: string,
  ) {}

  get reason(): string {
    return `${this.placeholder} in "${this.template}" has no tag value (${this.got})`;
  }
}

/** Most tags one template may expand to (list placeholders multiply): more is treated as no value. */
export const MAX_TAGS_PER_TEMPLATE = 1000;

const NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;
const BUILT_IN_SCALARS = new Set(['String', 'Int', 'Float', 'Boolean', 'ID']);

export type TemplateDirective = 'cached' | 'invalidates';

/** Where a template is used: what it may refer to, and what to check its paths against. */
export interface TemplateSite {
  readonly directive: TemplateDirective;
  readonly coordinate: string;
  readonly field: GraphQLField<unknown, unknown>;
  /** A root field (Query, Mutation): there is no parent to read from. */
  readonly isRoot: boolean;
}

/**
 * Parses and checks one template; throws a build error naming the field for: no text, unbalanced
 * braces, a placeholder that is not a dotted path of names, a root the directive cannot read
 * (`{result}` in @cached, a parent in @invalidates or on a root field), an argument or input field
 * the field lacks, or a path that cannot end on a scalar or a list of scalars.
 */
export function parseTagTemplate(source: unknown, site: TemplateSite): TagTemplate {
  const fail = (why: string): never => {
    throw new HerdcacheError(
      'E_INVALID_ARGUMENT',
      `herdcache: @${site.directive}(tags:) on ${site.coordinate}: ${why}`,
    );
  };
  if (typeof source !== 'string' || source.length === 0)
    return fail(`each tag must be a non-empty string, got ${describeValue(source)}`);
  const literals: string[] = [];
  const placeholders: Placeholder[] = [];
  let at = 0;
  for (;;) {
    const open = source.indexOf('{', at);
    const literal = source.slice(at, open === -1 ? undefined : open);
    if (literal.includes('}')) fail(`"${source}" has a "}" without its "{" (braces only delimit placeholders)`);
    literals.push(literal);
    if (open === -1) break;
    const close = source.indexOf('}', open + 1);
    const nextOpen = source.indexOf('{', open + 1);
    if (close === -1 || (nextOpen !== -1 && nextOpen < close)) fail(`"${source}" has a "{" without its "}"`);
    placeholders.push(parsePlaceholder(source.slice(open, close + 1), source, site, fail));
    at = close + 1;
  }
  return { source, literals, placeholders };
}

function parsePlaceholder(text: string, source: string, site: TemplateSite, fail: (why: string) => never): Placeholder {
  const segments = text.slice(1, -1).split('.');
  if (!segments.every((segment) => NAME.test(segment))) {
    fail(
      `${text} in "${source}" is not a placeholder: write {args.name}, ${site.directive === 'cached' ? "{parent.name} or {name} (the parent's)" : '{result} or {result.name}'}, dotted paths allowed`,
    );
  }
  const [head, ...rest] = segments as [string, ...string[]];
  if (head === 'args') {
    if (rest.length === 0) fail(`${text} in "${source}" names no argument: write {args.name}`);
    checkArgumentPath(site.field, rest, text, source, fail);
    return { text, root: 'args', path: rest };
  }
  if (site.directive === 'invalidates') {
    if (head === 'result') {
      checkResultPath(site.field.type, rest, text, source, site.coordinate, fail);
      return { text, root: 'result', path: rest };
    }
    return fail(
      `${text} in "${source}" is not known here: @invalidates reads {args.name} (the mutation's arguments) and {result} / {result.name} (what its resolver returned)`,
    );
  }
  if (head === 'result') {
    return fail(
      `${text} in "${source}": a @cached value's tags cannot depend on the value (they are fixed before it is computed); use {args.name} or {parent.name}`,
    );
  }
  const path = head === 'parent' ? rest : segments;
  if (path.length === 0) fail(`${text} in "${source}" names no property of the parent: write {parent.name}`);
  if (site.isRoot)
    fail(`${text} in "${source}": ${site.coordinate} is a root field, it has no parent; use {args.name}`);
  return { text, root: 'parent', path };
}

/** `{args.a.b}`: `a` is an argument, `b` a field of its input object type, and the end is a scalar or a list of them. */
function checkArgumentPath(
  field: GraphQLField<unknown, unknown>,
  path: readonly string[],
  text: string,
  source: string,
  fail: (why: string) => never,
): void {
  const arg: GraphQLArgument | undefined = field.args.find((candidate) => candidate.name === path[0]);
  if (arg === undefined) {
    const known = field.args.map((candidate) => candidate.name).join(', ');
    fail(
      `${text} in "${source}" names no argument of the field (${known === '' ? 'it has none' : `arguments: ${known}`})`,
    );
  }
  let type = arg!.type as GraphQLInputType;
  for (let i = 1; ; i++) {
    type = unwrapNonNull(type);
    const kind = kindOf(type);
    if (i === path.length) {
      if (kind === 'GraphQLInputObjectType')
        fail(`${text} in "${source}" is the input object ${String(type)}: name one of its fields`);
      if (kind === 'GraphQLList' && !isLeaf(unwrapNonNull((type as { ofType: GraphQLInputType }).ofType))) {
        fail(`${text} in "${source}" is ${String(type)}: a placeholder needs a scalar, an enum or a list of them`);
      }
      return;
    }
    if (kind === 'GraphQLInputObjectType') {
      const next = (type as { getFields(): Record<string, { type: GraphQLInputType }> }).getFields()[path[i]!];
      if (next === undefined)
        fail(`${text} in "${source}": the input object ${String(type)} has no field "${path[i]}"`);
      type = next!.type;
      continue;
    }
    // A custom scalar (JSON…) may hold an object: its path is checked when filled.
    if (kind === 'GraphQLScalarType' && !BUILT_IN_SCALARS.has(String(type))) return;
    fail(
      `${text} in "${source}": {args.${path.slice(0, i).join('.')}} is ${String(type)}, it has no field "${path[i]}"`,
    );
  }
}

/**
 * `{result…}` against the mutation's return type, as far as it can be known: the resolver returns a
 * backend object whose properties need not be the schema's fields, so only shapes are checked.
 */
function checkResultPath(
  returnType: GraphQLOutputType,
  path: readonly string[],
  text: string,
  source: string,
  coordinate: string,
  fail: (why: string) => never,
): void {
  const type = unwrapNonNull(returnType);
  const kind = kindOf(type);
  if (kind === 'GraphQLList') {
    if (path.length > 0)
      fail(
        `${text} in "${source}": ${coordinate} returns the list ${String(returnType)}; a path into a list is not supported (use {result} on a list of scalars, or {args.name})`,
      );
    if (!isLeaf(unwrapNonNull((type as { ofType: GraphQLOutputType }).ofType)))
      fail(`${text} in "${source}": ${coordinate} returns ${String(returnType)}, not scalars`);
    return;
  }
  if (isLeaf(type)) {
    if (path.length > 0 && BUILT_IN_SCALARS.has(String(type)))
      fail(
        `${text} in "${source}": ${coordinate} returns ${String(returnType)}, which has no "${path[0]}"; use {result} or {args.name}`,
      );
    return;
  }
  if (path.length === 0)
    fail(
      `${text} in "${source}": ${coordinate} returns the object type ${String(returnType)}; name one of its properties, e.g. {result.id}`,
    );
}

function unwrapNonNull<T extends GraphQLInputType | GraphQLOutputType>(type: T): T {
  return kindOf(type) === 'GraphQLNonNull' ? (type as unknown as { ofType: T }).ofType : type;
}

function kindOf(type: unknown): string {
  return Object.prototype.toString.call(type).slice(8, -1);
}

function isLeaf(type: unknown): boolean {
  const kind = kindOf(type);
  return kind === 'GraphQLScalarType' || kind === 'GraphQLEnumType';
}

/**
 * Reads `tags:` of a directive node as written in the SDL: a list of strings, or one string (input
 * coercion makes a single value a list of one). SDL validation does not check argument values.
 */
export function templatesOf(
  value: ConstValueNode,
  site: TemplateSite,
  literal: (node: ConstValueNode) => string,
): TagTemplate[] | undefined {
  if ((value.kind as string) === 'NullValue') return undefined;
  const items = (value.kind as string) === 'ListValue' ? (value as ConstListValueNode).values : [value];
  return items.map((item) => {
    if ((item.kind as string) !== 'StringValue') {
      throw new HerdcacheError(
        'E_INVALID_ARGUMENT',
        `herdcache: @${site.directive}(tags:) on ${site.coordinate}: each tag must be a string, got ${literal(item)}`,
      );
    }
    return parseTagTemplate((item as StringValueNode).value, site);
  });
}

/** The tags of one call, or the first template that could not be filled. Duplicates are dropped. */
export function fillTags(templates: readonly TagTemplate[], values: TagValues): string[] | UnfilledTag {
  const tags = new Set<string>();
  for (const template of templates) {
    const filled = fillTemplate(template, values);
    if (filled instanceof UnfilledTag) return filled;
    for (const tag of filled) tags.add(tag);
  }
  return [...tags];
}

/**
 * One template's tags. A placeholder whose value is a scalar (non-empty string, finite number,
 * bigint, boolean) gives one tag; a list of scalars gives one tag per item (an empty list: none);
 * anything else (null, undefined, an object, a promise…) leaves the template unfilled.
 */
export function fillTemplate(template: TagTemplate, values: TagValues): string[] | UnfilledTag {
  const { literals, placeholders } = template;
  if (placeholders.length === 0) return [template.source];
  let tags = [literals[0]!];
  for (let i = 0; i < placeholders.length; i++) {
    const placeholder = placeholders[i]!;
    const value = valueAt(values[placeholder.root], placeholder.path);
    const parts = tagParts(value);
    if (parts === undefined) return new UnfilledTag(template.source, placeholder.text, `got ${describeValue(value)}`);
    if (tags.length * parts.length > MAX_TAGS_PER_TEMPLATE) {
      return new UnfilledTag(
        template.source,
        placeholder.text,
        `more than ${MAX_TAGS_PER_TEMPLATE} tags from one template`,
      );
    }
    const after = literals[i + 1]!;
    const next: string[] = [];
    for (const head of tags) for (const part of parts) next.push(head + part + after);
    tags = next;
  }
  return tags;
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let value = root;
  for (const name of path) {
    // Arrays and functions are not walked into: `{result.items.id}` has no single meaning.
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[name];
  }
  return value;
}

function tagParts(value: unknown): string[] | undefined {
  const one = scalarPart(value);
  if (one !== undefined) return [one];
  if (!Array.isArray(value)) return undefined;
  const parts: string[] = [];
  for (const item of value) {
    const part = scalarPart(item);
    if (part === undefined) return undefined;
    parts.push(part);
  }
  return parts;
}

function scalarPart(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return value.length > 0 ? value : undefined;
    case 'number':
      return Number.isFinite(value) ? String(value) : undefined;
    case 'bigint':
    case 'boolean':
      return String(value);
    default:
      return undefined;
  }
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (Array.isArray(value)) return `a list of ${value.length} that is not all scalars`;
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
