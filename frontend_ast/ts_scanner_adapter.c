/* External-scanner entry points of the TypeScript and TSX grammars, over
 * tree-sitter-javascript's scanner (both from the PyPI sdists in grammars.txt).
 *
 * Why: the typescript/ and tsx/ scanner.c of the tree-sitter-typescript sdists include
 * ../../common/scanner.h, which no published sdist contains. The external tokens of
 * both TypeScript grammars are JavaScript's eight (automatic semicolon, template chars,
 * ternary "?", HTML comment, "||", escape sequence, regex pattern, JSX text), in the same
 * order, followed by two of their own:
 *   8  _function_signature_automatic_semicolon: an automatic semicolon after a body-less
 *      function signature (overloads, `declare function f(): void` + newline). Asked of
 *      the JavaScript scanner as an automatic semicolon and renamed when it matches.
 *   9  __error_recovery: valid only while the parser recovers from an error; we then
 *      return false so the internal lexer decides (what upstream's scanner does too).
 * One JavaScript token needs a TypeScript rule: a "?" followed (after white space) by
 * ":", ")" or "," is the marker of an optional parameter or property (`f(a?: T)`,
 * `(a?, b?) => 0`), not a ternary "?": the scanner then matches nothing, so the internal
 * lexer gives the grammar's own "?". (Without it every optional parameter was an ERROR
 * node: jupyterlab_widgets' manager.ts, unit test RealSources.TypeScriptJupyterlabWidgets.)
 * The JavaScript scanner keeps no state (create returns NULL, serialize writes 0 bytes).
 * Written for Swizzle from the grammar's external-token list (its parser.c), not copied.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <wctype.h>

#include "tree_sitter/parser.h"

void *tree_sitter_javascript_external_scanner_create(void);
void tree_sitter_javascript_external_scanner_destroy(void *payload);
bool tree_sitter_javascript_external_scanner_scan(void *payload, TSLexer *lexer, const bool *valid_symbols);
unsigned tree_sitter_javascript_external_scanner_serialize(void *payload, char *buffer);
void tree_sitter_javascript_external_scanner_deserialize(void *payload, const char *buffer, unsigned length);

enum { kAutomaticSemicolon = 0, kTernaryQmark = 2, kJsTokens = 8, kFunctionSignatureSemicolon = 8, kErrorRecovery = 9 };

static bool scan_typescript(void *payload, TSLexer *lexer, const bool *valid) {
  if (valid[kErrorRecovery]) return false;
  bool js_valid[kJsTokens];
  memcpy(js_valid, valid, sizeof js_valid);
  const bool signature_only = valid[kFunctionSignatureSemicolon] && !valid[kAutomaticSemicolon];
  if (valid[kFunctionSignatureSemicolon]) js_valid[kAutomaticSemicolon] = true;
  if (!tree_sitter_javascript_external_scanner_scan(payload, lexer, js_valid)) return false;
  if (signature_only && lexer->result_symbol == kAutomaticSemicolon) lexer->result_symbol = kFunctionSignatureSemicolon;
  if (lexer->result_symbol == kTernaryQmark) {
    /* The token already ends after the "?" (mark_end): looking further does not extend it. */
    while (iswspace(lexer->lookahead)) lexer->advance(lexer, false);
    if (lexer->lookahead == ':' || lexer->lookahead == ')' || lexer->lookahead == ',') return false;
  }
  return true;
}

#define SWZ_TS_SCANNER(lang)                                                                     \
  void *tree_sitter_##lang##_external_scanner_create(void) {                                     \
    return tree_sitter_javascript_external_scanner_create();                                     \
  }                                                                                              \
  void tree_sitter_##lang##_external_scanner_destroy(void *p) {                                  \
    tree_sitter_javascript_external_scanner_destroy(p);                                          \
  }                                                                                              \
  bool tree_sitter_##lang##_external_scanner_scan(void *p, TSLexer *lexer, const bool *valid) {  \
    return scan_typescript(p, lexer, valid);                                                     \
  }                                                                                              \
  unsigned tree_sitter_##lang##_external_scanner_serialize(void *p, char *buffer) {              \
    return tree_sitter_javascript_external_scanner_serialize(p, buffer);                         \
  }                                                                                              \
  void tree_sitter_##lang##_external_scanner_deserialize(void *p, const char *b, unsigned n) {   \
    tree_sitter_javascript_external_scanner_deserialize(p, b, n);                                \
  }

SWZ_TS_SCANNER(typescript)
SWZ_TS_SCANNER(tsx)
