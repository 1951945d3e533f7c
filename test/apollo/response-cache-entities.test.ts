/** The entities a response holds (its `Type:id` tags): aliases, fragments, abstract types by __typename, and one document's selections reused across results. */
import { buildSchema, parse } from 'graphql';
import { entityTags } from '../../src/graphql/response-result';

const schema = buildSchema(`
  interface Node { id: ID! }
  type User implements Node { id: ID!, name: String!, friends: [User!]! }
  type Post implements Node { id: ID!, author: User! }
  union Result = User | Post
  type Query { user(id: ID!): User, search: [Result!]!, node(id: ID!): Node }
`);

it('finds entities through aliases, fragments, lists and abstract types', () => {
  const document = parse(`
    query Q { me: user(id: "1") { ...U friends { id } } search { __typename ... on Post { id author { id } } } node(id: "9") { __typename id } }
    fragment U on User { id name }
  `);
  const data = {
    me: { id: '1', name: 'Ada', friends: [{ id: '2' }, { id: '3' }] },
    search: [{ __typename: 'Post', id: 'p1', author: { id: '4' } }, { __typename: 'User' }],
    node: { __typename: 'Post', id: '9' },
  };
  expect(entityTags(schema, document, 'Q', data).sort()).toEqual([
    'Post:9',
    'Post:p1',
    'User:1',
    'User:2',
    'User:3',
    'User:4',
  ]);
  // The same document, another result: the selections are reused, the tags are this result's own.
  const other = { me: { id: '7', name: 'Bob', friends: [] }, search: [], node: null };
  expect(entityTags(schema, document, 'Q', other)).toEqual(['User:7']);
  // The same field selected twice under one response key (merged selections).
  const merged = parse('{ user(id: "1") { friends { id } } user(id: "1") { friends { name } id } }');
  expect(
    entityTags(schema, merged, undefined, { user: { id: '1', friends: [{ id: '5', name: 'x' }] } }).sort(),
  ).toEqual(['User:1', 'User:5']);
});
