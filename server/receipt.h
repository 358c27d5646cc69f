// Signed execution receipts (`swizzle-rt serve --receipts KEYFILE`, `swizzle-rt keygen`,
// `swizzle-rt verify-receipt`). A receipt binds what was asked (a BLAKE3 hash of the
// canonical request), what was answered (BLAKE3 of the output token ids and of the
// response as sent), what answered it (BLAKE3 of the package manifest, the GGUF's
// content hash, the model id), how (sampling parameters and seed) and what it cost
// (prompt / cached / uncached / output tokens), at a time, under an Ed25519 signature
// (libsodium). BLAKE3 is the reference C implementation shipped by Debian's
// librust-blake3-dev. The exact format, precise enough for another implementation to
// verify receipts, is docs/receipts.md; this file is its C++ implementation.
//
//   receipt  = "swzr1." base64url(payload) "." base64url(Ed25519 signature of payload)
//   payload  = canonical JSON (keys sorted, compact) of the fields of ReceiptFacts
//
// Where a response carries it: the header X-Swizzle-Receipt (non-streamed responses) and
// the top-level field "swizzle_receipt" of the response object, or, for a stream, of its
// last JSON event (OpenAI: the chunk before `data: [DONE]`; Anthropic: message_stop).
#pragma once

#include "engine/engine.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace swz::server {

inline constexpr const char* kReceiptHeader = "X-Swizzle-Receipt";  ///< non-streamed responses
inline constexpr const char* kReceiptField = "swizzle_receipt";     ///< top-level field of the carrying JSON object
inline constexpr const char* kReceiptFormat = "swizzle-receipt/1";  ///< payload "format"
inline constexpr const char* kReceiptPrefix = "swzr1";              ///< first dot-separated part of a receipt

/// Incremental BLAKE3 (256-bit output).
class Blake3 {
 public:
  Blake3();
  ~Blake3();
  Blake3(const Blake3&) = delete;
  Blake3& operator=(const Blake3&) = delete;
  /// Adds `data` to the hashed message.
  void update(std::string_view data);
  /// The hash of everything added so far, 64 lower-case hex digits (the hasher stays usable).
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// BLAKE3 of `data`, 64 lower-case hex digits.
std::string blake3_hex(std::string_view data);

/// The canonical text of a JSON value: nlohmann::json's compact dump (no whitespace),
/// object keys in byte order (nlohmann's std::map), strings as UTF-8 with only `"`, `\`
/// and control characters escaped, numbers as nlohmann prints them (integers in decimal,
/// other numbers in the shortest form that reads back to the same double).
std::string canonical_json(const nlohmann::json& j);

/// canonical_json of the parsed request body. Throws std::invalid_argument when `body`
/// is not JSON (the server hashes only bodies it accepted).
std::string canonical_request(std::string_view body);

/// BLAKE3 of the output token ids: for each choice in index order, its token count as a
/// 4-byte little-endian unsigned integer, then each token id as a 4-byte little-endian
/// signed integer.
std::string output_tokens_blake3(const std::vector<std::vector<int32_t>>& choices);

/// An Ed25519 key pair (libsodium's layout: secret = 32-byte seed || 32-byte public key).
struct ReceiptKey {
  std::array<unsigned char, 32> public_key{};
  std::array<unsigned char, 64> secret_key{};
};

/// A fresh key pair from the system's random source.
ReceiptKey generate_receipt_key();
/// Writes the secret key file (the 32-byte seed as 64 hex digits and a newline, mode 0600)
/// and the public key file (the 32-byte key as 64 hex digits and a newline). Refuses to
/// replace an existing secret key file unless `overwrite`. Throws std::runtime_error.
void write_receipt_key(const ReceiptKey& key, const std::string& secret_path, const std::string& public_path,
                       bool overwrite = false);
/// Reads a secret key file written by write_receipt_key (64 hex digits, surrounding
/// whitespace ignored). Throws std::invalid_argument naming the file and the problem.
ReceiptKey read_receipt_secret_key(const std::string& path);
/// A public key: `spec` is 64 hex digits, or the path of a file holding them.
/// Throws std::invalid_argument.
std::array<unsigned char, 32> read_receipt_public_key(const std::string& spec);
/// The key id receipts carry: the first 16 hex digits of BLAKE3(public key).
std::string receipt_key_id(const std::array<unsigned char, 32>& public_key);

/// What served a request, fixed for a server's lifetime.
struct ModelIdentity {
  std::string model;              ///< the served model id (/v1/models)
  std::string manifest_blake3;    ///< BLAKE3 of the package's manifest.json bytes
  std::string gguf_content_hash;  ///< the manifest's source_gguf.content_hash, "<algorithm>:<digest>" ("" if none)
};

/// Reads `package_path`/manifest.json (or `package_path` itself when it is a file).
/// Throws std::invalid_argument when it cannot be read.
ModelIdentity read_model_identity(const std::string& package_path, const std::string& model_id);

/// The per-request content of a receipt (the signer adds the model identity, key id and time).
struct ReceiptFacts {
  std::string endpoint;         ///< "/v1/chat/completions" | "/v1/completions" | "/v1/messages"
  bool stream = false;
  std::string request_blake3;   ///< blake3_hex(canonical_request(body))
  std::string response_blake3;  ///< see ResponseHasher / seal_response_body
  std::vector<std::vector<int32_t>> output;  ///< generated token ids per choice (TokenClock::token_runs)
  engine::SamplingParams sampling;  ///< as the request asked (after the API's defaults)
  int max_tokens = -1;              ///< -1: none given (until the end or a full context)
  int n = 1;                        ///< choices per prompt
  int prompt_tokens = 0;
  int cached_tokens = 0;
};

/// Signs receipts with one key for one served model. Thread-safe (const).
class ReceiptSigner {
 public:
  ReceiptSigner(const ReceiptKey& key, ModelIdentity model);
  /// The payload object of `f` stamped with the current time (UTC).
  nlohmann::json payload(const ReceiptFacts& f) const;
  /// The compact receipt string of payload(f).
  std::string sign(const ReceiptFacts& f) const;
  /// Signs an arbitrary payload object (tests use it to forge well-signed variants).
  std::string sign_payload(const nlohmann::json& payload) const;
  const std::string& key_id() const { return key_id_; }
  const ModelIdentity& model() const { return model_; }

 private:
  ReceiptKey key_;
  ModelIdentity model_;
  std::string key_id_;
};

/// Non-streamed responses: sets facts.response_blake3 = BLAKE3(canonical_json(body)),
/// signs, adds body["swizzle_receipt"] and returns the receipt (for the header).
std::string seal_response_body(const ReceiptSigner& signer, ReceiptFacts facts, nlohmann::json& body);

/// How a stream's writes reach the client when receipts are on: every SSE event passes
/// through it. Events that may be the stream's last JSON event (OpenAI: a chunk with a
/// non-null finish_reason or with no choices; Anthropic: message_stop) are held back until
/// the next write, which releases them; seal() adds the receipt to the held event and
/// writes it. Every byte written is hashed, so the receipt's response_blake3 is
/// BLAKE3(bytes before the carrying event || canonical_json(carrying event's JSON)).
/// With `enabled` false it only passes writes on.
class ReceiptStream {
 public:
  enum class Wire { OpenAI, Anthropic };
  ReceiptStream(Wire wire, std::function<bool(std::string_view)> out, bool enabled);
  /// Passes one whole SSE event on (or holds it back, see above). False once the client is gone.
  bool write(std::string_view event);
  /// True when an event is held back (the candidate carrier of the receipt).
  bool holding() const { return !held_.empty(); }
  /// Completes `facts` (response_blake3), signs, writes the held event with the receipt
  /// added. No-op returning true when nothing is held or receipts are off.
  bool seal(const ReceiptSigner& signer, ReceiptFacts facts);

 private:
  bool pass(std::string_view bytes);
  Wire wire_;
  std::function<bool(std::string_view)> out_;
  bool enabled_;
  bool ok_ = true;
  std::string held_;
  Blake3 hash_;
};

/// A response as saved by a client, split the way receipts hash it.
struct ResponseDigest {
  bool stream = false;
  std::string response_blake3;  ///< recomputed from the text
  std::string receipt;          ///< the "swizzle_receipt" the response carries ("" if none)
  nlohmann::json carrier;       ///< the carrying JSON object, receipt field removed (null if none)
};

/// Finds the receipt-carrying object in a saved response (a JSON body, or the raw bytes of
/// an SSE stream) and recomputes response_blake3. Throws std::invalid_argument when the
/// text is neither, or when a stream holds no event with a receipt.
ResponseDigest digest_response(std::string_view response);

/// A receipt decoded without checking anything.
struct DecodedReceipt {
  std::string payload_text;  ///< the signed bytes
  nlohmann::json payload;    ///< parsed payload
  std::string signature;     ///< 64 raw bytes
};
/// Throws std::invalid_argument naming what is malformed.
DecodedReceipt decode_receipt(std::string_view receipt);

/// What verify_receipt found. Each problem names the field that does not match and both
/// values, e.g. "request_blake3: the receipt has 1f..., the request file hashes to 9c...".
struct ReceiptVerification {
  nlohmann::json payload;             ///< the decoded payload (null if the receipt is malformed)
  bool signature_ok = false;
  std::vector<std::string> checked;   ///< what was compared and agreed (for the report)
  std::vector<std::string> problems;  ///< every mismatch, field first
  bool ok() const { return signature_ok && problems.empty(); }
};

/// Inputs of verify_receipt besides the receipt and the key: each is compared when given.
struct VerifyInputs {
  std::optional<std::string> request;   ///< the request body as sent
  std::optional<std::string> response;  ///< the response as received (JSON body or raw SSE bytes)
  std::optional<ModelIdentity> model;   ///< a local package's identity (--package)
};

/// Checks the signature against `public_key` and, when given, the request's and the
/// response's hashes, the receipt the response carries (field by field), the usage the
/// response reports, the sampling fields the request sets and the package's identity.
/// Never throws: a malformed receipt or input is reported in `problems`.
ReceiptVerification verify_receipt(std::string_view receipt, const std::array<unsigned char, 32>& public_key,
                                   const VerifyInputs& inputs = {});

}  // namespace swz::server
