// JSON Schema -> grammar (grammar.h): the subset OpenAI's strict structured outputs accept,
// plus common keywords. Supported:
//   type (a name or an array of names: object, array, string, number, integer, boolean, null),
//   properties, required, additionalProperties (false, true or a schema; see below), items
//   (a schema, or false), minItems, maxItems, enum, const, anyOf, oneOf (as anyOf: output is
//   valid when the alternatives are disjoint), allOf with one element, $ref to "#" or to a
//   JSON pointer inside the schema ($defs, definitions, ...), minLength, maxLength (<= 10000),
//   uniqueItems false, minimum 0 or 1 on integers; annotations are ignored (title, description, default, examples,
//   format, $schema, $id, $comment, deprecated, readOnly, writeOnly, discriminator) as are
//   keywords JSON Schema does not define.
// Rejected with GrammarError naming the keyword: pattern, patternProperties, other minimums,
// maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, not, if/then/else,
// dependentRequired, dependentSchemas, dependencies, uniqueItems true, contains,
// minContains, maxContains, prefixItems, propertyNames, unevaluatedProperties,
// unevaluatedItems, minProperties, maxProperties, $dynamicRef, $recursiveRef, allOf with
// several schemas, anyOf/oneOf/$ref combined with validation keywords; an invalid schema
// (wrong types, an unknown type name, an empty enum, a $ref that does not resolve, a
// required property not in properties); nesting deeper than kMaxSchemaDepth; a $ref cycle
// with no finite instance; a grammar over kMaxStates states.
//
// What is generated: keys in the order of `properties`, every required one, each optional
// one possibly left out; additional properties are never generated when `properties` is
// given (the output is valid whatever additionalProperties says); an object schema without
// `properties` whose additionalProperties is not false gets any keys with values of that
// schema. Between tokens at most kMaxWhitespace bytes of whitespace; nothing before or
// after the top-level value. Numbers: at most 16 integer and 16 fraction digits and a
// 3-digit exponent. Nesting at generation time is bounded by the matcher's stack depth.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace swz::grammar {

inline constexpr int kMaxSchemaDepth = 64;
inline constexpr int kMaxWhitespace = 20;
inline constexpr size_t kMaxStates = 2'000'000;
inline constexpr int kMaxRepeatedMembers = 4;  ///< member lists in one object (compile_repeatable)

/// Compiles JSON Schemas into rules of one Builder (several schemas may share it: tool
/// calls). Each compile() resolves $ref against the schema it is given.
class JsonSchemaCompiler {
 public:
  explicit JsonSchemaCompiler(Builder& b);
  /// The rule matching exactly the JSON texts valid under `schema` (as restricted above).
  /// Throws GrammarError (keyword, JSON pointer, message).
  uint32_t compile(const nlohmann::ordered_json& schema);
  /// As compile(), but when the root is an object schema with a required property its
  /// member list may repeat inside the braces ({"city": "Paris", "city": "Tokyo"}): how
  /// Qwen2.5 writes parallel calls of one function, which server/tool_calls.h splits into
  /// calls (each valid under `schema`); at most kMaxRepeatedMembers lists.
  uint32_t compile_repeatable(const nlohmann::ordered_json& schema);
  /// The rule matching any JSON value.
  uint32_t any_value();
  /// The rule matching whitespace between tokens (0..kMaxWhitespace bytes of " \t\n\r").
  uint32_t ws();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// A grammar for `schema` (see the file comment); throws GrammarError.
Grammar compile_json_schema(const nlohmann::ordered_json& schema);
/// OpenAI's `json_object` mode: any JSON object.
Grammar json_object_grammar();
/// Throws GrammarError("$ref", "", ...) when `root` derives no finite string (a recursion
/// without a base case). Called by compile_json_schema.
void check_productive(const Grammar& g);

}  // namespace swz::grammar
