#include "pact/llm/tokenizer.hpp"

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include "pact/core/error.hpp"
#include "pact/core/file.hpp"

namespace pact::llm {

Tokenizer::Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp) : sp_(std::move(sp)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  return parse(read_file(path, "tokenizer", kMaxTokenizerBytes), path);
}

Tokenizer Tokenizer::parse(std::string_view bytes, std::string_view where) {
  if (bytes.size() > kMaxTokenizerBytes) {
    throw_error(ErrorCode::invalid_argument, std::string(where),
                fmt::format("{} bytes; a tokenizer model is at most {}", bytes.size(), kMaxTokenizerBytes));
  }
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(bytes);
  if (!status.ok()) {
    throw_error(ErrorCode::parse_error, std::string(where),
                fmt::format("not a SentencePiece model: {}", status.ToString()));
  }
  Tokenizer t(std::move(sp));
  t.where_ = where;
  return t;
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok())
    throw_error(ErrorCode::invalid_argument, where_, fmt::format("cannot encode: {}", status.ToString()));
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(const std::vector<std::int64_t>& ids) const {
  // Runs of known ids are decoded together (SentencePiece joins pieces across them); an id past the
  // tokenizer's vocabulary (a model's padded rows) is written "<id N>".
  std::string text;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    std::string piece;
    const auto status = sp_->Decode(run, &piece);
    if (!status.ok())
      throw_error(ErrorCode::invalid_argument, where_, fmt::format("cannot decode: {}", status.ToString()));
    text += piece;
    run.clear();
  };
  for (std::int64_t id : ids) {
    if (id >= 0 && id < vocab_size()) {
      run.push_back(static_cast<int>(id));
      continue;
    }
    flush();
    text += fmt::format("<id {}>", id);
  }
  flush();
  return text;
}

std::int64_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

}  // namespace pact::llm
