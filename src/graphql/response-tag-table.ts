/**
 * The entity tags a response walk (./response-result) lists, one string per entity while a type
 * has few entities: a stored response holds its tags for as long as it is kept, and the store
 * indexes them; the same entity's tag in each response it is in would be a string of its own (40
 * per 20-item page) and a hash computed again.
 */
import type { GraphQLInterfaceType, GraphQLNamedType, GraphQLSchema, GraphQLUnionType } from 'graphql';
import { tagOf } from './schema-hints';

/** Ids whose tag is kept per type: past it, tags are made per result. */
const TAGS_PER_TYPE = 2_000;
/** Longest id whose tag is kept (the table lives as long as the schema: a long id is made per result). */
const TAG_ID_MAX = 128;
const typeTags = new WeakMap<GraphQLNamedType, Map<string, TypeTag>>();

/**
 * An entity's tag, with the stamp of the last walk that met it: a walk lists it once. The tags are
 * shared by every walk of the process, so this holds only because a walk runs synchronously to its
 * end and never starts another inside it: keep it so (an await in a walk would let two interleave).
 */
export interface TypeTag {
  readonly tag: string;
  walk: number;
}

/** The type's table of tags, by id. */
export function tagsOf(type: GraphQLNamedType): Map<string, TypeTag> {
  let tags = typeTags.get(type);
  if (tags === undefined) typeTags.set(type, (tags = new Map()));
  return tags;
}

/** Keeps `tag` for `id` in the type's table while it has room (false: made per result, not kept). */
export function keepTag(tags: Map<string, TypeTag>, id: string, tag: string, stamp: number): boolean {
  if (tags.size >= TAGS_PER_TYPE || id.length > TAG_ID_MAX) return false;
  tags.set(id, { tag, walk: stamp });
  return true;
}

/** What tags an entity of one type: its `Type:` head and its table of tags (see entityTag). */
export interface TagReading {
  readonly tagHead: string;
  readonly tagsById: Map<string, TypeTag>;
}

/** Most types an untyped object of an abstract type is tagged as (past it: not tagged, docs/response-cache.md). */
const POSSIBLE_TAGGED = 16;
const possibleByType = new WeakMap<GraphQLNamedType, readonly TagReading[]>();

/** The tag readings of the object types `type` may return (none for a type that is not abstract, or past POSSIBLE_TAGGED). */
export function possibleTags(schema: GraphQLSchema, type: GraphQLNamedType): readonly TagReading[] {
  let found = possibleByType.get(type);
  if (found === undefined) {
    const tag = tagOf(type);
    const possible =
      tag === 'GraphQLInterfaceType' || tag === 'GraphQLUnionType'
        ? schema.getPossibleTypes(type as GraphQLInterfaceType | GraphQLUnionType)
        : [];
    // Only types with an `id` field can be the object (its `id` was selected): a union's other
    // members (a NotFound) are no entities.
    const entities = possible.filter((object) => object.getFields().id !== undefined);
    found =
      entities.length > POSSIBLE_TAGGED
        ? []
        : entities.map((object) => ({ tagHead: `${object.name}:`, tagsById: tagsOf(object) }));
    possibleByType.set(type, found);
  }
  return found;
}
