/**
 * A response's key: the schema (a fingerprint of its types), the operation document (hashed), its
 * name, the variables it declares in canonical form, the session (PRIVATE: the session id; PUBLIC:
 * `true` for a request `sessionId` gives one, so signed-in and anonymous viewers never share) and the `vary`
 * parts, under herdcache's reserved response namespace. The parts are encoded so they cannot run
 * into each other.
 */
import { createHash } from 'node:crypto';
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import { RESPONSE_NAMESPACE, namespaceHead } from '../core/namespaces';
import { ARGS_INLINE_MAX, canonicalArgs, flatPart } from './keys';
import { type NotCacheable, type StaticPolicy, operationPolicy } from './response-policy';
import type { ResponseRequest } from './response-types';
import type { Computation } from '../core/registry';
import type { OperationReads } from './response-admission';

/**
 * Head of every response key: the response namespace (`\0response\0`, see core/namespaces), which
 * getOrCompute refuses and no loader key can start with, so no raw key reads or plants a response.
 */
export const RESPONSE_KEY_HEAD = namespaceHead(RESPONSE_NAMESPACE);

const NOT_ONE: unique symbol = Symbol('not one operation');

/**
 * What a request of a one-operation document is planned with, made once per document (and
 * schema): its policy, its key up to the variables, its declared variables sorted. A request then
 * costs a WeakMap read, its variables' encoding and one concatenation (ResponseEngine.plan).
 */
export interface KnownOperation {
  readonly schema: GraphQLSchema;
  /** The operation's name (null: anonymous); a request naming another one is planned the general way. */
  readonly name: string | null;
  readonly policy: StaticPolicy | NotCacheable;
  /** The key up to its variables, for a request without a session part or vary parts ('' when not cacheable). */
  readonly head: string;
  /** The declared variables, sorted, and `JSON.stringify(name) + ':'` of each (encodeNamed). */
  readonly names: readonly string[];
  readonly labels: readonly string[];
  /**
   * The engine's own state of the operation, kept here so a request reaches it from its plan
   * without a WeakMap read each (a cold table in a running server): its computation and its
   * admission's counts, set by the engine when first known.
   */
  computation: Computation | undefined;
  reads: OperationReads | undefined;
}

const NOTHING_KNOWN = { head: '', names: [], labels: [], computation: undefined, reads: undefined } as const;

/** One engine's key maker, with its memos (documents hashed once, name parts made once). */
export class ResponseKeys {
  readonly #documents = new WeakMap<DocumentNode, string>();
  readonly #schemas = new WeakMap<GraphQLSchema, string>();
  readonly #nameParts = new Map<string | null, string>();
  /** Per document, the name of its only operation (null: anonymous; NOT_ONE: none or several). */
  readonly #onlyOperations = new WeakMap<DocumentNode, string | null | typeof NOT_ONE>();
  readonly #known = new WeakMap<DocumentNode, KnownOperation | typeof NOT_ONE>();
  /** The engine's defaultMaxAge (seconds), which the known operations' policies are made with. */
  readonly #defaultMaxAge: number;

  constructor(defaultMaxAge: number) {
    this.#defaultMaxAge = defaultMaxAge;
  }

  /** The request's operation as known (see KnownOperation); undefined: planned the general way (several operations…). */
  known(request: ResponseRequest): KnownOperation | undefined {
    let known = this.#known.get(request.document);
    if (known === undefined || (known !== NOT_ONE && known.schema !== request.schema)) {
      known = this.#know(request.schema, request.document);
      this.#known.set(request.document, known);
    }
    if (known === NOT_ONE) return undefined;
    const name = request.operationName;
    return name === undefined || name === null || name === known.name ? known : undefined;
  }

  #know(schema: GraphQLSchema, document: DocumentNode): KnownOperation | typeof NOT_ONE {
    const name = this.#onlyOperation(document);
    if (name === NOT_ONE) return NOT_ONE;
    const policy = operationPolicy(schema, document, undefined, this.#defaultMaxAge);
    if (typeof policy === 'string') return { ...NOTHING_KNOWN, schema, name, policy };
    const names = [...policy.variables].sort();
    const head = `${RESPONSE_KEY_HEAD}${this.#schemaHash(schema)}${this.#documentHash(document)}:${this.#namePart(name)}:`;
    const labels = names.map((variable) => `${JSON.stringify(variable)}:`);
    return { schema, name, policy, head, names, labels, computation: undefined, reads: undefined };
  }

  /** The request's variables the operation declares (`declared`), canonical; undefined: unkeyable. */
  variables(
    variables: Readonly<Record<string, unknown>> | null | undefined,
    declared: readonly string[],
    known: KnownOperation | undefined,
  ): string | undefined {
    if (variables === undefined || variables === null) return '{}';
    if (known !== undefined) {
      const encoded = encodeNamed(variables, known.names, known.labels);
      if (encoded !== undefined) return encoded;
    }
    return canonicalArgs(declaredOnly(variables, declared));
  }

  key(
    request: ResponseRequest,
    session: string | true | null,
    vary: string | readonly string[] | null,
    variables: string,
  ): string {
    // JSON of a fixed-length array: the parts cannot run into each other. The document is hashed
    // (sha256 of its AST without locations: whitespace and comments do not matter), once per document.
    const name = this.#operationName(request);
    const parts = session === null && vary === null ? this.#namePart(name) : JSON.stringify([name, session, vary]);
    return `${RESPONSE_KEY_HEAD}${this.#schemaHash(request.schema)}${this.#documentHash(request.document)}:${parts}:${variables}`;
  }

  /**
   * The name of the operation that runs: a document of one operation runs it whether or not the
   * request names it (Apollo Client sends its name, curl or a GET link may not), so both are one
   * key, on every server; with several, the name the request gives (the document hash holds them).
   */
  #operationName(request: ResponseRequest): string | null {
    const only = this.#onlyOperation(request.document);
    return only === NOT_ONE ? (request.operationName ?? null) : only;
  }

  /** The name of the document's only operation (null: anonymous), or NOT_ONE: none or several. */
  #onlyOperation(document: DocumentNode): string | null | typeof NOT_ONE {
    let only = this.#onlyOperations.get(document);
    if (only === undefined) {
      only = NOT_ONE;
      for (const definition of document.definitions) {
        if ((definition.kind as string) !== 'OperationDefinition') continue;
        if (only !== NOT_ONE) {
          only = NOT_ONE;
          break;
        }
        only = (definition as OperationDefinitionNode).name?.value ?? null;
      }
      this.#onlyOperations.set(document, only);
    }
    return only;
  }

  /** `JSON.stringify([name, null, null])`, made once per operation name (a bounded memo). */
  #namePart(name: string | null): string {
    let part = this.#nameParts.get(name);
    if (part === undefined) {
      part = JSON.stringify([name, null, null]);
      if (this.#nameParts.size < 1024) this.#nameParts.set(name, part);
    }
    return part;
  }

  /**
   * What tells schemas apart (two servers on one cache: a public and an admin API answer the same
   * query differently): a sha256 of every type's name, fields, their types and arguments, members
   * and values, the same on every replica serving that schema. Made once per schema.
   */
  #schemaHash(schema: GraphQLSchema): string {
    let hash = this.#schemas.get(schema);
    if (hash === undefined) {
      const digest = createHash('sha256');
      const types = schema.getTypeMap();
      for (const name of Object.keys(types).sort()) {
        const type = types[name] as unknown as Shape;
        digest.update(`\n${name}`);
        const fields = type.getFields?.();
        if (fields !== undefined)
          for (const [field, { type: of, args }] of Object.entries(fields))
            digest.update(
              `,${field}:${String(of)}(${(args ?? []).map((arg) => `${arg.name}:${String(arg.type)}`).join(',')})`,
            );
        for (const member of type.getTypes?.() ?? []) digest.update(`|${member.name}`);
        for (const value of type.getValues?.() ?? []) digest.update(`=${value.name}`);
      }
      hash = `${digest.digest('base64url').slice(0, 16)}:`;
      this.#schemas.set(schema, hash);
    }
    return hash;
  }

  #documentHash(document: DocumentNode): string {
    let hash = this.#documents.get(document);
    if (hash === undefined) {
      const text = JSON.stringify(document, (name, value: unknown) => (name === 'loc' ? undefined : value));
      hash = createHash('sha256').update(text).digest('base64url');
      this.#documents.set(document, hash);
    }
    return hash;
  }
}

/**
 * The request's variables the operation declares, as graphql-js reads them: its own properties,
 * enumerable or not (it asks hasOwnProperty), never inherited ones. The others cannot change the
 * answer: keyed, any client could make each request a miss by adding one. (A non-enumerable one,
 * which only code building the variables can make, was left out once: two requests differing in
 * it shared a key.)
 */
function declaredOnly(variables: Readonly<Record<string, unknown>>, declared: readonly string[]): unknown {
  const kept: Record<string, unknown> = {};
  for (const name of declared)
    if (Object.hasOwn(variables, name))
      Object.defineProperty(kept, name, {
        value: variables[name],
        enumerable: true,
        writable: true,
        configurable: true,
      });
  return kept;
}

/**
 * canonicalArgs of the `names` of `record` (own properties only), given `names` sorted and
 * `labels[i]` = `JSON.stringify(names[i]) + ':'`: what canonicalArgs gives for an object of
 * those properties, without copying or sorting them (a response key's declared variables, per
 * request). Undefined where that needs the general path (a value not flat, an inherited one, past
 * ARGS_INLINE_MAX): the caller then asks canonicalArgs.
 */
function encodeNamed(record: object, names: readonly string[], labels: readonly string[]): string | undefined {
  const proto = Object.getPrototypeOf(record) as object | null;
  if (proto !== Object.prototype && proto !== null) return undefined;
  let out = '{';
  for (let i = 0; i < names.length; i++) {
    const value = (record as Record<string, unknown>)[names[i]!];
    if (value === undefined) continue;
    if (!Object.hasOwn(record, names[i]!)) return undefined;
    const part = flatPart(value);
    if (part === undefined) return undefined;
    out += (out.length === 1 ? '' : ',') + labels[i]! + part;
    if (out.length >= ARGS_INLINE_MAX) return undefined;
  }
  return out + '}';
}

/** What #schemaHash reads of a named type (no graphql import: it is an optional peer). */
interface Shape {
  getFields?(): Record<string, { readonly type: unknown; readonly args?: readonly { name: string; type: unknown }[] }>;
  getTypes?(): readonly { name: string }[];
  getValues?(): readonly { name: string }[];
}
