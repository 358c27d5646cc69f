#include "receipt.h"

#include <blake3.h>
#include <sodium.h>

#include <charconv>
#include <climits>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace swz::server {

using nlohmann::json;

namespace {

void sodium_ready() {
  static const int rc = sodium_init();  // 0 = initialised, 1 = already was; -1 = unusable
  if (rc < 0) throw std::runtime_error("libsodium could not be initialised");
}

std::string to_hex(const unsigned char* p, size_t n) {
  std::string s(2 * n + 1, '\0');
  sodium_bin2hex(s.data(), s.size(), p, n);
  s.pop_back();
  return s;
}

/// Decodes exactly `n` bytes of hex; false if `hex` is anything else.
bool from_hex(std::string_view hex, unsigned char* out, size_t n) {
  size_t len = 0;
  const char* end = nullptr;
  if (hex.size() != 2 * n) return false;
  if (sodium_hex2bin(out, n, hex.data(), hex.size(), nullptr, &len, &end) != 0) return false;
  return len == n && end == hex.data() + hex.size();
}

std::string b64url(std::string_view bytes) {
  const int variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING;
  std::string s(sodium_base64_encoded_len(bytes.size(), variant), '\0');
  sodium_bin2base64(s.data(), s.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), variant);
  s.resize(std::char_traits<char>::length(s.c_str()));
  return s;
}

bool from_b64url(std::string_view text, std::string& out) {
  out.assign(text.size(), '\0');
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(), nullptr, &len,
                        &end, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0)
    return false;
  if (end != text.data() + text.size()) return false;
  out.resize(len);
  return true;
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  const size_t last = s.find_last_not_of(ws);
  s.erase(last == std::string::npos ? 0 : last + 1);
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument(path + ": cannot be read");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The float as the engine uses it, written as the shortest decimal that reads back to
/// that float, as a double: 0.7f -> 0.7 (not 0.699999988079071).
double float_value(float f) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

/// A payload value for a report: strings as they are, everything else as JSON.
std::string show(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

const json* field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

}  // namespace

// ---- BLAKE3 ----------------------------------------------------------------------------

struct Blake3::State {
  blake3_hasher h;
};

Blake3::Blake3() : s_(std::make_unique<State>()) { blake3_hasher_init(&s_->h); }
Blake3::~Blake3() = default;

void Blake3::update(std::string_view data) { blake3_hasher_update(&s_->h, data.data(), data.size()); }

std::string Blake3::hex() const {
  unsigned char out[BLAKE3_OUT_LEN];
  blake3_hasher_finalize(&s_->h, out, sizeof out);  // does not modify the hasher
  return to_hex(out, sizeof out);
}

std::string blake3_hex(std::string_view data) {
  Blake3 h;
  h.update(data);
  return h.hex();
}

std::string canonical_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string canonical_request(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) throw std::invalid_argument("the request is not JSON");
  return canonical_json(j);
}

std::string output_tokens_blake3(const std::vector<std::vector<int32_t>>& choices) {
  Blake3 h;
  auto u32 = [&h](uint32_t v) {
    const char b[4] = {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff), static_cast<char>((v >> 16) & 0xff),
                       static_cast<char>((v >> 24) & 0xff)};
    h.update(std::string_view(b, 4));
  };
  for (const auto& c : choices) {
    u32(static_cast<uint32_t>(c.size()));
    for (int32_t t : c) u32(static_cast<uint32_t>(t));
  }
  return h.hex();
}

// ---- keys ------------------------------------------------------------------------------

ReceiptKey generate_receipt_key() {
  sodium_ready();
  ReceiptKey k;
  crypto_sign_keypair(k.public_key.data(), k.secret_key.data());
  return k;
}

void write_receipt_key(const ReceiptKey& key, const std::string& secret_path, const std::string& public_path,
                       bool overwrite) {
  sodium_ready();
  unsigned char seed[crypto_sign_SEEDBYTES];
  crypto_sign_ed25519_sk_to_seed(seed, key.secret_key.data());
  const std::string secret = to_hex(seed, sizeof seed) + "\n";
  sodium_memzero(seed, sizeof seed);
  const int flags = O_WRONLY | O_CREAT | (overwrite ? O_TRUNC : O_EXCL);
  const int fd = ::open(secret_path.c_str(), flags, 0600);
  if (fd < 0)
    throw std::runtime_error(secret_path + (errno == EEXIST ? ": exists (pass --force to replace it)" : ": cannot be created"));
  const bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ::close(fd);
  if (!ok) throw std::runtime_error(secret_path + ": cannot be written");
  std::ofstream pub(public_path, std::ios::binary | std::ios::trunc);
  pub << to_hex(key.public_key.data(), key.public_key.size()) << "\n";
  if (!pub) throw std::runtime_error(public_path + ": cannot be written");
}

ReceiptKey read_receipt_secret_key(const std::string& path) {
  sodium_ready();
  const std::string text = trim(read_file(path));
  unsigned char seed[crypto_sign_SEEDBYTES];
  if (!from_hex(text, seed, sizeof seed))
    throw std::invalid_argument(path + ": not a receipt signing key (expected the 32-byte Ed25519 seed as 64 hex digits; "
                                       "`swizzle-rt keygen` writes one)");
  ReceiptKey k;
  crypto_sign_seed_keypair(k.public_key.data(), k.secret_key.data(), seed);
  sodium_memzero(seed, sizeof seed);
  return k;
}

std::array<unsigned char, 32> read_receipt_public_key(const std::string& spec) {
  std::array<unsigned char, 32> pk{};
  if (from_hex(trim(spec), pk.data(), pk.size())) return pk;
  const std::string text = trim(read_file(spec));
  if (!from_hex(text, pk.data(), pk.size()))
    throw std::invalid_argument(spec + ": not a public key (expected 64 hex digits, as `swizzle-rt keygen` writes to KEY.pub)");
  return pk;
}

std::string receipt_key_id(const std::array<unsigned char, 32>& public_key) {
  return blake3_hex(std::string_view(reinterpret_cast<const char*>(public_key.data()), public_key.size())).substr(0, 16);
}

ModelIdentity read_model_identity(const std::string& package_path, const std::string& model_id) {
  namespace fs = std::filesystem;
  const std::string manifest = fs::is_directory(package_path) ? (fs::path(package_path) / "manifest.json").string() : package_path;
  const std::string bytes = read_file(manifest);
  ModelIdentity m;
  m.model = model_id;
  m.manifest_blake3 = blake3_hex(bytes);
  const json j = json::parse(bytes, nullptr, false);
  if (const json* src = field(j, "source_gguf"))
    if (const json* ch = field(*src, "content_hash")) {
      const json* alg = field(*ch, "algorithm");
      const json* dig = field(*ch, "digest");
      if (alg && dig && alg->is_string() && dig->is_string())
        m.gguf_content_hash = alg->get<std::string>() + ":" + dig->get<std::string>();
    }
  return m;
}

// ---- signing ---------------------------------------------------------------------------

ReceiptSigner::ReceiptSigner(const ReceiptKey& key, ModelIdentity model)
    : key_(key), model_(std::move(model)), key_id_(receipt_key_id(key.public_key)) {
  sodium_ready();
}

json ReceiptSigner::payload(const ReceiptFacts& f) const {
  int output = 0;
  for (const auto& c : f.output) output += static_cast<int>(c.size());
  const engine::SamplingParams& s = f.sampling;
  json sampling = {{"temperature", float_value(s.temperature)},
                   {"top_k", s.top_k},
                   {"top_p", float_value(s.top_p)},
                   {"min_p", float_value(s.min_p)},
                   {"presence_penalty", float_value(s.presence_penalty)},
                   {"frequency_penalty", float_value(s.frequency_penalty)},
                   {"seed", s.seed ? json(*s.seed) : json(nullptr)},
                   {"max_tokens", f.max_tokens},
                   {"n", f.n}};
  return {{"format", kReceiptFormat},
          {"key_id", key_id_},
          {"model", model_.model},
          {"manifest_blake3", model_.manifest_blake3},
          {"gguf_content_hash", model_.gguf_content_hash},
          {"endpoint", f.endpoint},
          {"stream", f.stream},
          {"request_blake3", f.request_blake3},
          {"response_blake3", f.response_blake3},
          {"output_tokens_blake3", output_tokens_blake3(f.output)},
          {"output_tokens", output},
          {"prompt_tokens", f.prompt_tokens},
          {"cached_tokens", f.cached_tokens},
          {"uncached_tokens", f.prompt_tokens - f.cached_tokens},
          {"sampling", std::move(sampling)},
          {"time", utc_now()}};
}

std::string ReceiptSigner::sign_payload(const json& payload) const {
  const std::string text = canonical_json(payload);
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, reinterpret_cast<const unsigned char*>(text.data()), text.size(), key_.secret_key.data());
  return std::string(kReceiptPrefix) + "." + b64url(text) + "." +
         b64url(std::string_view(reinterpret_cast<const char*>(sig), sizeof sig));
}

std::string ReceiptSigner::sign(const ReceiptFacts& f) const { return sign_payload(payload(f)); }

std::string seal_response_body(const ReceiptSigner& signer, ReceiptFacts facts, json& body) {
  facts.response_blake3 = blake3_hex(canonical_json(body));
  std::string receipt = signer.sign(facts);
  body[kReceiptField] = receipt;
  return receipt;
}

// ---- streams ---------------------------------------------------------------------------

ReceiptStream::ReceiptStream(Wire wire, std::function<bool(std::string_view)> out, bool enabled)
    : wire_(wire), out_(std::move(out)), enabled_(enabled) {}

bool ReceiptStream::pass(std::string_view bytes) {
  if (!ok_) return false;
  hash_.update(bytes);
  if (!out_(bytes)) ok_ = false;
  return ok_;
}

bool ReceiptStream::write(std::string_view event) {
  if (!enabled_) return out_(event);
  if (!held_.empty()) {
    std::string prev = std::move(held_);
    held_.clear();
    pass(prev);
  }
  // Compact JSON escapes every quote inside a string, so these patterns match only the
  // fields themselves: a non-null finish_reason, an empty choices array (usage chunk).
  const bool candidate =
      wire_ == Wire::OpenAI
          ? event.rfind("data: {", 0) == 0 && (event.find("\"finish_reason\":\"") != std::string_view::npos ||
                                               event.find("\"choices\":[]") != std::string_view::npos)
          : event.rfind("event: message_stop\n", 0) == 0;
  if (candidate) {
    held_.assign(event);
    return ok_;
  }
  return pass(event);
}

bool ReceiptStream::seal(const ReceiptSigner& signer, ReceiptFacts facts) {
  if (!enabled_ || held_.empty()) return ok_;
  const std::string held = std::move(held_);
  held_.clear();
  // OpenAI: "data: {...}\n\n"; Anthropic: "event: message_stop\ndata: {...}\n\n".
  const size_t at = held.rfind("data: ", 0) == 0 ? 0 : held.find("\ndata: ") + 1;
  const size_t end = held.find('\n', at + 6);
  json ev = json::parse(held.substr(at + 6, end - (at + 6)), nullptr, false);
  if (!ev.is_object()) return pass(held);  // not ours to seal (cannot happen for server events)
  const std::string canonical = canonical_json(ev);
  hash_.update(canonical);
  facts.response_blake3 = hash_.hex();
  ev[kReceiptField] = signer.sign(facts);
  if (!ok_) return false;
  const std::string out = held.substr(0, at) + "data: " + canonical_json(ev) + "\n\n";
  if (!out_(out)) ok_ = false;
  return ok_;
}

// ---- verification ----------------------------------------------------------------------

ResponseDigest digest_response(std::string_view response) {
  ResponseDigest d;
  size_t first = response.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) throw std::invalid_argument("the response is empty");
  if (response[first] == '{') {
    json body = json::parse(response, nullptr, false);
    if (!body.is_object()) throw std::invalid_argument("the response is not a JSON object");
    if (const json* r = field(body, kReceiptField); r && r->is_string()) d.receipt = r->get<std::string>();
    body.erase(kReceiptField);
    d.response_blake3 = blake3_hex(canonical_json(body));
    d.carrier = std::move(body);
    return d;
  }
  // An SSE stream: events end with a blank line; the carrier is the event whose data
  // object has the receipt field, hashed after the raw bytes before it.
  d.stream = true;
  size_t pos = 0;
  bool any_event = false;
  while (pos < response.size()) {
    size_t end = response.find("\n\n", pos);
    const size_t stop = end == std::string_view::npos ? response.size() : end;
    std::string_view event = response.substr(pos, stop - pos);
    size_t line = 0;
    while (line < event.size()) {
      size_t nl = event.find('\n', line);
      std::string_view l = event.substr(line, (nl == std::string_view::npos ? event.size() : nl) - line);
      if (l.rfind("data:", 0) == 0) {
        any_event = true;
        std::string_view data = l.substr(5);
        if (!data.empty() && data[0] == ' ') data.remove_prefix(1);
        json j = json::parse(data, nullptr, false);
        if (const json* r = field(j, kReceiptField); r && r->is_string()) {
          d.receipt = r->get<std::string>();
          j.erase(kReceiptField);
          Blake3 h;
          h.update(response.substr(0, pos));
          h.update(canonical_json(j));
          d.response_blake3 = h.hex();
          d.carrier = std::move(j);
          return d;
        }
      }
      if (nl == std::string_view::npos) break;
      line = nl + 1;
    }
    if (end == std::string_view::npos) break;
    pos = end + 2;
  }
  if (!any_event) throw std::invalid_argument("the response is neither a JSON object nor an SSE stream");
  return d;  // a stream without a receipt: receipt and response_blake3 stay empty
}

DecodedReceipt decode_receipt(std::string_view receipt) {
  std::string r = trim(std::string(receipt));
  const size_t a = r.find('.');
  const size_t b = a == std::string::npos ? std::string::npos : r.find('.', a + 1);
  if (a == std::string::npos || b == std::string::npos || r.find('.', b + 1) != std::string::npos)
    throw std::invalid_argument("not a receipt: expected three dot-separated parts 'swzr1.PAYLOAD.SIGNATURE'");
  if (r.substr(0, a) != kReceiptPrefix)
    throw std::invalid_argument("not a receipt: it starts with '" + r.substr(0, a) + "', not '" + kReceiptPrefix + "'");
  sodium_ready();
  DecodedReceipt d;
  if (!from_b64url(std::string_view(r).substr(a + 1, b - a - 1), d.payload_text))
    throw std::invalid_argument("the receipt's payload is not base64url (no padding)");
  if (!from_b64url(std::string_view(r).substr(b + 1), d.signature) || d.signature.size() != crypto_sign_BYTES)
    throw std::invalid_argument("the receipt's signature is not 64 bytes of base64url");
  d.payload = json::parse(d.payload_text, nullptr, false);
  if (!d.payload.is_object()) throw std::invalid_argument("the receipt's payload is not a JSON object");
  return d;
}

namespace {

/// Compares every field of two payloads (sampling field by field); `what` names the second.
void compare_payloads(const json& mine, const json& other, const std::string& what, ReceiptVerification& v) {
  std::vector<std::string> diffs;
  auto cmp = [&](const std::string& name, const json* a, const json* b) {
    if (a && b && *a == *b) return;
    diffs.push_back(name + ": the receipt has " + (a ? show(*a) : "nothing") + ", " + what + " has " + (b ? show(*b) : "nothing"));
  };
  std::set<std::string> keys;
  for (auto it = mine.begin(); it != mine.end(); ++it) keys.insert(it.key());
  for (auto it = other.begin(); it != other.end(); ++it) keys.insert(it.key());
  for (const std::string& k : keys) {
    const json* a = field(mine, k.c_str());
    const json* b = field(other, k.c_str());
    if (k == "sampling" && a && b && a->is_object() && b->is_object()) {
      std::set<std::string> sk;
      for (auto it = a->begin(); it != a->end(); ++it) sk.insert(it.key());
      for (auto it = b->begin(); it != b->end(); ++it) sk.insert(it.key());
      for (const std::string& s : sk) cmp("sampling." + s, field(*a, s.c_str()), field(*b, s.c_str()));
    } else {
      cmp(k, a, b);
    }
  }
  if (diffs.empty()) v.checked.push_back("the receipt equals " + what);
  for (auto& d : diffs) v.problems.push_back(std::move(d));
}

/// Compares the payload's integer `key` with the response's count.
void compare_count(const json& payload, const char* key, const json* response_value, const std::string& response_name,
                   ReceiptVerification& v) {
  if (!response_value || !response_value->is_number_integer()) return;
  const json* mine = field(payload, key);
  if (mine && *mine == *response_value) {
    v.checked.push_back(std::string(key) + " = " + response_name + " (" + show(*response_value) + ")");
    return;
  }
  v.problems.push_back(std::string(key) + ": the receipt has " + (mine ? show(*mine) : "nothing") + ", the response's " +
                       response_name + " is " + show(*response_value));
}

/// The usage (and model) a response reports, against the payload.
void check_usage(const json& payload, const json& carrier, ReceiptVerification& v) {
  if (const json* m = field(carrier, "model"); m && m->is_string()) {
    const json* mine = field(payload, "model");
    if (mine && *mine == *m) v.checked.push_back("model = the response's model (" + m->get<std::string>() + ")");
    else v.problems.push_back("model: the receipt has " + (mine ? show(*mine) : "nothing") + ", the response's model is " + show(*m));
  }
  const json* u = field(carrier, "usage");
  if (!u || !u->is_object()) return;
  if (field(*u, "input_tokens")) {  // Anthropic
    const json* in = field(*u, "input_tokens");
    const json* read = field(*u, "cache_read_input_tokens");
    const json* made = field(*u, "cache_creation_input_tokens");
    if (in && read && made && in->is_number_integer() && read->is_number_integer() && made->is_number_integer()) {
      json prompt = in->get<int64_t>() + read->get<int64_t>() + made->get<int64_t>();
      compare_count(payload, "prompt_tokens", &prompt, "usage input_tokens + cache_read + cache_creation", v);
      compare_count(payload, "cached_tokens", read, "usage.cache_read_input_tokens", v);
    }
    compare_count(payload, "output_tokens", field(*u, "output_tokens"), "usage.output_tokens", v);
    return;
  }
  compare_count(payload, "prompt_tokens", field(*u, "prompt_tokens"), "usage.prompt_tokens", v);
  compare_count(payload, "output_tokens", field(*u, "completion_tokens"), "usage.completion_tokens", v);
  if (const json* d = field(*u, "prompt_tokens_details"))
    compare_count(payload, "cached_tokens", field(*d, "cached_tokens"), "usage.prompt_tokens_details.cached_tokens", v);
}

/// The sampling fields the request sets, against the payload's.
void check_request_fields(const json& payload, const json& request, ReceiptVerification& v) {
  const json* s = field(payload, "sampling");
  auto expect = [&](const std::string& name, const json* sent, const json& want_in_receipt) {
    const json* mine = name == "stream" ? field(payload, "stream") : (s ? field(*s, name.c_str()) : nullptr);
    const std::string label = name == "stream" ? "stream" : "sampling." + name;
    if (mine && *mine == want_in_receipt) {
      v.checked.push_back(label + " = the request's " + name + " (" + show(want_in_receipt) + ")");
      return;
    }
    v.problems.push_back(label + ": the receipt has " + (mine ? show(*mine) : "nothing") + ", the request sets " + show(*sent));
  };
  for (const char* name : {"temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty"}) {
    const json* x = field(request, name);
    if (x && x->is_number()) expect(name, x, float_value(static_cast<float>(x->get<double>())));
  }
  for (const char* name : {"top_k", "n", "seed"}) {
    const json* x = field(request, name);
    if (x && x->is_number_integer()) expect(name, x, *x);
  }
  // Chat: max_completion_tokens wins over max_tokens (openai_chat.h).
  const json* mt = field(request, "max_completion_tokens");
  if (!mt || mt->is_null()) mt = field(request, "max_tokens");
  if (mt && mt->is_number_integer() && mt->get<int64_t>() >= 1 && mt->get<int64_t>() <= INT32_MAX) expect("max_tokens", mt, *mt);
  const json* st = field(request, "stream");
  const json no = false;
  expect("stream", st && st->is_boolean() ? st : &no, st && st->is_boolean() ? *st : no);
}

}  // namespace

ReceiptVerification verify_receipt(std::string_view receipt, const std::array<unsigned char, 32>& public_key,
                                   const VerifyInputs& in) {
  ReceiptVerification v;
  DecodedReceipt d;
  try {
    sodium_ready();
    d = decode_receipt(receipt);
  } catch (const std::exception& e) {
    v.problems.push_back(std::string("receipt: ") + e.what());
    return v;
  }
  v.payload = d.payload;
  const json& p = d.payload;
  const std::string key_id = receipt_key_id(public_key);

  v.signature_ok = crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(d.signature.data()),
                                               reinterpret_cast<const unsigned char*>(d.payload_text.data()),
                                               d.payload_text.size(), public_key.data()) == 0;
  if (v.signature_ok) v.checked.push_back("signature: valid Ed25519 signature by key " + key_id);
  else
    v.problems.push_back("signature: does not verify under the public key given (key id " + key_id +
                         "): the payload was altered after signing, or another key signed it");
  if (const json* kid = field(p, "key_id"); !kid || *kid != key_id)
    v.problems.push_back("key_id: the receipt names key " + (kid ? show(*kid) : "nothing") + ", the public key given is " + key_id);
  if (const json* f = field(p, "format"); !f || *f != kReceiptFormat)
    v.problems.push_back("format: the receipt has " + (f ? show(*f) : "nothing") + ", expected " + kReceiptFormat);

  if (in.request) {
    try {
      const std::string h = blake3_hex(canonical_request(*in.request));
      const json* mine = field(p, "request_blake3");
      if (mine && *mine == h) v.checked.push_back("request_blake3 = BLAKE3 of the request file's canonical JSON");
      else v.problems.push_back("request_blake3: the receipt has " + (mine ? show(*mine) : "nothing") + ", the request file hashes to " + h);
      check_request_fields(p, json::parse(*in.request), v);
    } catch (const std::exception& e) {
      v.problems.push_back(std::string("request: ") + e.what());
    }
  }

  if (in.response) {
    try {
      const ResponseDigest r = digest_response(*in.response);
      const json* st = field(p, "stream");
      if (!st || *st != r.stream)
        v.problems.push_back(std::string("stream: the receipt has ") + (st ? show(*st) : "nothing") + ", the response is " +
                             (r.stream ? "a stream" : "not a stream"));
      if (r.receipt.empty()) {
        v.problems.push_back("swizzle_receipt: the response carries no receipt, so its hash cannot be recomputed");
      } else {
        const json* mine = field(p, "response_blake3");
        if (mine && *mine == r.response_blake3) v.checked.push_back("response_blake3 = BLAKE3 of the response as received");
        else
          v.problems.push_back("response_blake3: the receipt has " + (mine ? show(*mine) : "nothing") + ", the response hashes to " +
                               r.response_blake3);
        if (trim(r.receipt) != trim(std::string(receipt))) {
          try {
            compare_payloads(p, decode_receipt(r.receipt).payload, "the response's own receipt", v);
          } catch (const std::exception& e) {
            v.problems.push_back(std::string("swizzle_receipt: the response's receipt is malformed: ") + e.what());
          }
        } else {
          v.checked.push_back("the receipt is the one the response carries");
        }
        check_usage(p, r.carrier, v);
      }
    } catch (const std::exception& e) {
      v.problems.push_back(std::string("response: ") + e.what());
    }
  }

  if (in.model) {
    for (auto [name, value] : {std::pair<const char*, const std::string*>{"manifest_blake3", &in.model->manifest_blake3},
                               {"gguf_content_hash", &in.model->gguf_content_hash}}) {
      const json* mine = field(p, name);
      if (mine && *mine == *value) v.checked.push_back(std::string(name) + " = the package's (" + *value + ")");
      else
        v.problems.push_back(std::string(name) + ": the receipt has " + (mine ? show(*mine) : "nothing") + ", the package has " +
                             *value);
    }
  }
  return v;
}

}  // namespace swz::server
