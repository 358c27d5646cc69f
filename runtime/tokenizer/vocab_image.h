// Metadata-only ("vocab") GGUF images: a GGUF's header and key/value section copied
// verbatim, tensor_count set to 0, some string values optionally replaced, padded to the
// alignment. Enough for Tokenizer::from_gguf (via gguf::File::parse), and readable from a
// truncated GGUF such as part01.bin of a chunked model, since only the metadata is read.
// test/tokenizer/gguf_vocab.py vocab_image() builds byte-identical images for llama.cpp.
// Layout per the GGUF spec (ggml-org/ggml docs/gguf.md), versions 2 and 3.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace swz::tokenizer {

/// Reads at most the first `limit` bytes of `path` and returns its metadata image.
/// `replace` maps keys of STRING type to new values (absent keys are not added).
/// Throws tokenizer::Error for I/O errors, a bad magic, an unknown value type, or metadata
/// that does not fit in `limit` bytes / the file.
std::vector<uint8_t> vocab_image(const std::string& path, const std::map<std::string, std::string>& replace = {},
                                 size_t limit = size_t{256} << 20);

}  // namespace swz::tokenizer
