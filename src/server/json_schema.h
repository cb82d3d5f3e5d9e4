/* JSON schema to GBNF (src/grammar), for response_format and forced tool calls.
 * Pure: a jansson value in, grammar text out; fuzzed through
 * fuzz/fuzz_server_request.c and unit-tested in tests/test_server_grammar.c.
 *
 * Supported: type (a name or an array of names: object, array, string, number,
 * integer, boolean, null), properties + required (properties come in the
 * schema's order, the required ones always, each optional one present or not;
 * no other keys: additionalProperties may only be false or absent),
 * items / minItems / maxItems, minLength / maxLength (characters), enum, const,
 * anyOf / oneOf (any one of them; oneOf's exclusivity is not enforced), $ref to
 * "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), an empty schema
 * or true (any value). Annotations are ignored (title, description, default,
 * examples, $schema, $id, $comment, strict, deprecated, readOnly, writeOnly).
 * Any other keyword (pattern, format, minimum, allOf, not, if, prefixItems,
 * uniqueItems, patternProperties, ...) is refused with VT_E_INVALID naming it
 * and where it is ("'format' at $.properties.date is not supported").
 *
 * Output: JSON as json.gbnf writes it (numbers with at most 16 integer and 16
 * fraction digits, strings of printable characters and the JSON escapes),
 * whitespace between tokens as llama.cpp's converter allows ("", " ", or a
 * newline and up to 20 spaces/tabs). */
#ifndef VT_SERVER_JSON_SCHEMA_H
#define VT_SERVER_JSON_SCHEMA_H

#include "server/strbuf.h"
#include "server/toolcall.h"
#include "vt.h"

#include <jansson.h>

#define JSCHEMA_MAX_DEPTH 32     /* nesting of schemas */
#define JSCHEMA_MAX_RULES 2000   /* rules one conversion may write */
#define JSCHEMA_MAX_ITEMS 1000   /* minItems / maxItems / minLength / maxLength */

/* GBNF for a JSON text that matches schema, appended to out with start rule
 * "root". `what` names the schema in messages ("response_format.json_schema.schema"). */
vt_status jschema_to_gbnf(json_t *schema, const char *what, strbuf *out);
/* GBNF for any JSON object (response_format {"type": "json_object"}). */
void jschema_any_object_gbnf(strbuf *out);
/* GBNF for the rest of a tool call in format f after tc_prefill(f, args_style,
 * name): the call of `name` (NULL: of any tool in tools), its arguments matching
 * that tool's "parameters" schema, then the format's closer. Keywords the
 * converter refuses elsewhere (format, minimum, pattern, ...) are left
 * unenforced here: a tool's schema is the client's fixed API, and the call
 * still has the schema's shape.
 *
 * The arguments: JSON (hermes, llama3, mistral, deepseek, and harmony's
 * <|message|>{...}, then <|call|> or the end of the generation); one block a
 * property for qwen3_coder (<parameter=KEY>\nVALUE\n</parameter>\n) and glm
 * (<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n), in the schema's
 * order, the required ones always. A VALUE whose schema is a string (see
 * jschema_string_arg) is raw text (no NUL) that holds none of the markers that would end
 * it (glm's neither starts nor ends with a newline; with maxLength or minLength
 * it holds no '<' at all), any other is JSON by its schema. Where the call's
 * text ends at a marker that starts with '<' (qwen3_coder, glm, harmony), JSON
 * strings write '<' as \u003c. VT_E_INVALID for a tool or property name
 * the XML-style formats cannot hold (a '<', '>' or newline in it);
 * VT_E_UNSUPPORTED for a format without a grammar (TC_NONE).
 * A marker that tk holds (one token of the model's vocabulary, see tc_tokens)
 * is written as that token, <[id]>, not as its text; tk NULL: every marker is
 * text. */
vt_status jschema_tool_call_gbnf(tc_format f, bool args_style, json_t *tools, const char *name, const tc_tokens *tk,
                                 strbuf *out);

/* Whether the XML-style formats write parameter `key` of tool `name` as raw
 * text: its schema is a string (type "string", or a const or an enum of strings
 * only). tools: the request's "tools" array (a json_t *); the signature is
 * tc_options.string_arg's. */
bool jschema_string_arg(void *tools, const char *name, size_t name_len, const char *key, size_t key_len);

#endif
