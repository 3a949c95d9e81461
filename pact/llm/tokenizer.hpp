#pragma once
/// A folder's SentencePiece tokenizer.model (Debian's libsentencepiece), for `pact generate --prompt`: text
/// to token ids and back. No BOS or EOS id is added: the ids are exactly SentencePiece's encoding of the
/// text (give --prompt-ids for any other sequence).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pact::llm {

/// Largest tokenizer.model read (docs/limits.md): Llama's is 500 KB, the largest public ones a few MB.
inline constexpr std::uint64_t kMaxTokenizerBytes = 64u << 20;

class Tokenizer {
 public:
  /// Reads `path` (size-limited). An unreadable file is io_error; one SentencePiece cannot load is
  /// parse_error naming the file and SentencePiece's reason.
  static Tokenizer load(const std::string& path);
  /// The same from the file's bytes; `where` names them in messages.
  static Tokenizer parse(std::string_view bytes, std::string_view where);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<std::int64_t> encode(std::string_view text) const;
  /// Ids outside the tokenizer's vocabulary (a model's padded rows) come out as "<id N>".
  std::string decode(const std::vector<std::int64_t>& ids) const;
  std::int64_t vocab_size() const;

 private:
  explicit Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp);
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string where_;
};

}  // namespace pact::llm
