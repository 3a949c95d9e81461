// Standalone driver for libFuzzer harnesses in builds without -fsanitize=fuzzer (g++ release, asan).
// Usage: HARNESS CORPUS_DIR... [--mutations=N]
// Replays every corpus file, then N deterministic mutations (bit flips, byte inserts and deletes,
// truncations, splices) of the corpus entries. A crash, sanitizer report or uncaught exception fails
// the smoke test, exactly as it would under libFuzzer.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  std::vector<std::vector<std::uint8_t>> corpus;
  long mutations = 10000;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--mutations=", 0) == 0) {
      mutations = std::stol(arg.substr(12));
      continue;
    }
    std::filesystem::path dir(arg);
    if (!std::filesystem::is_directory(dir)) {
      std::fprintf(stderr, "corpus directory '%s' not found\n", arg.c_str());
      return 2;
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(entry.path(), std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  for (const auto& input : corpus) LLVMFuzzerTestOneInput(input.data(), input.size());
  std::mt19937_64 rng(0x5eed);
  for (long n = 0; n < mutations; ++n) {
    std::vector<std::uint8_t> x = corpus[rng() % corpus.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 5) {
        case 0:
          if (!x.empty()) x[rng() % x.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          x.insert(x.begin() + static_cast<long>(x.empty() ? 0 : rng() % (x.size() + 1)),
                   static_cast<std::uint8_t>(rng()));
          break;
        case 2:
          if (!x.empty()) x.erase(x.begin() + static_cast<long>(rng() % x.size()));
          break;
        case 3:
          if (!x.empty()) x.resize(rng() % x.size());
          break;
        default: {
          const auto& other = corpus[rng() % corpus.size()];
          if (!other.empty()) {
            std::size_t from = rng() % other.size();
            x.insert(x.end(), other.begin() + static_cast<long>(from), other.end());
          }
        }
      }
    }
    LLVMFuzzerTestOneInput(x.data(), x.size());
  }
  std::printf("replayed %zu corpus inputs and %ld mutations\n", corpus.size(), mutations);
  return 0;
}
