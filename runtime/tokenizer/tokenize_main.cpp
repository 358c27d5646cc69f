// swz-tokenize: command-line front end of swz_tokenizer, for debugging prompts and for the
// randomized llama.cpp comparison (test/tokenizer/fuzz_compare.py).
//
//   swz-tokenize MODEL.gguf [options] < text      prints the token ids of stdin, space-separated
//     --parse-special   match control-token texts (llama_tokenize parse_special=true)
//     --add-special     add BOS/EOS as the vocabulary asks (add_special=true)
//     --pieces          print "id<TAB>piece" lines instead
//     --decode          stdin holds ids; print the decoded text
//     --hex-lines       each stdin line is one hex-encoded text; print one id line per input line
//     --pre NAME        override tokenizer.ggml.pre (vocabulary experiments)
// MODEL.gguf may be a truncated GGUF (only the metadata is read).
#include <cstdio>
#include <map>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_image.h"

namespace {

void print_ids(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line.push_back(' ');
    line += std::to_string(ids[i]);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: swz-tokenize MODEL.gguf [--parse-special] [--add-special] [--pieces] [--decode] "
                 "[--hex-lines] [--pre NAME] < input\n");
    return 2;
  }
  bool parse = false, add = false, pieces = false, decode = false, hex_lines = false;
  std::string pre;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--parse-special") parse = true;
    else if (a == "--add-special") add = true;
    else if (a == "--pieces") pieces = true;
    else if (a == "--decode") decode = true;
    else if (a == "--hex-lines") hex_lines = true;
    else if (a == "--pre" && i + 1 < argc) pre = argv[++i];
    else {
      std::fprintf(stderr, "swz-tokenize: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    std::map<std::string, std::string> repl;
    if (!pre.empty()) repl["tokenizer.ggml.pre"] = pre;
    std::vector<uint8_t> img = swz::tokenizer::vocab_image(argv[1], repl);
    auto f = swz::gguf::File::parse(img.data(), img.size(), argv[1]);
    auto tok = swz::tokenizer::Tokenizer::from_gguf(f);
    if (hex_lines) {
      std::string line;
      while (std::getline(std::cin, line)) {
        std::string s;
        for (size_t i = 0; i + 1 < line.size(); i += 2) s.push_back(static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16)));
        print_ids(tok.encode(s, add, parse));
      }
      return 0;
    }
    std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (decode) {
      std::istringstream ss(in);
      std::vector<int32_t> ids;
      for (int32_t id; ss >> id;) ids.push_back(id);
      std::string s = tok.decode(ids);
      std::fwrite(s.data(), 1, s.size(), stdout);
      return 0;
    }
    auto ids = tok.encode(in, add, parse);
    if (!pieces) {
      print_ids(ids);
      return 0;
    }
    for (int32_t id : ids) std::printf("%d\t%s\n", id, tok.token_to_piece(id).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "swz-tokenize: %s\n", e.what());
    return 1;
  }
  return 0;
}
