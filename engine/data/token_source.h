#pragma once
// Token sources for language-model training. A source produces windows of
// seq+1 tokens; row b of a batch holds inputs windows[b, :seq] and targets
// windows[b, 1:]. Every source is deterministic from its spec, seed, split and
// stream position, and state()/restore() resume it bit-identically.
//
// Data parallelism: the stream is a sequence of windows numbered 0, 1, 2, ...
// that does not depend on the world size. A call to next_batch(batch, seq)
// consumes batch * world windows; rank r gets windows r, r + world,
// r + 2 * world, ... of them, so ranks read disjoint data and together read
// exactly what one process with batch * world rows would read (in another
// row order). state() holds only this global position, so it is the same on
// every rank, and a run may resume with another rank or world size.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/data/tokenizer_facts.h"

namespace sdp::data {

// Which part of a data set a source reads. How each source splits:
// - synthetic: both splits draw from the same language (transition table);
//   val samples from an independent stream (a different stream key).
// - text: train is the first 95% of the bytes, val the last 5%.
// - llmc: if the matched files include both names containing "val" and names
//   not containing it, val reads the "val" files and train the others
//   (llm.c/FineWeb naming: *_train_*.bin, *_val_*.bin); otherwise the tokens
//   of all files, concatenated, split 95% train / 5% val.
enum class Split { train, val };
const char* split_name(Split split);

// Which part of the stream this process reads: rank r of world (see above).
struct StreamPart {
  int rank = 0;
  int world = 1;
};

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t vocab_size() const = 0;
  // windows: [batch, seq + 1] int32, row-major; inputs [:, :seq], targets [:, 1:].
  virtual void next_batch(int32_t* windows, int64_t batch, int64_t seq) = 0;
  // The global stream position and the identity of the source; enough to
  // resume bit-identically.
  virtual nlohmann::json state() const = 0;
  // Throws sdp::Error naming the field when the state is from another source.
  virtual void restore(const nlohmann::json& state) = 0;
  virtual std::string describe() const = 0;
  // The lowest mean loss (nats/token) any model can reach on windows of `seq`
  // tokens, when the source knows it (the synthetic language); else nullopt.
  virtual std::optional<double> best_achievable_loss(int64_t /*seq*/) const {
    return std::nullopt;
  }
  // The tokenizer behind the ids and the special tokens the data defines.
  virtual TokenizerFacts tokenizer() const { return {}; }
};

// Builds a source from a spec. Valid forms:
//   synthetic
//   synthetic:vocab=V,seed=S,language=L,successors=K,zipf=A,floor=F
//       (any subset of the options; see synthetic_language.h)
//   text:PATH
//   llmc:GLOB_OR_PATH[,GLOB_OR_PATH...][,vocab=V]
// `seed` seeds sampling where the source samples (synthetic); `seed=` in the
// spec overrides it. Throws sdp::Error listing the valid forms on a bad spec.
//
// shuffle: the file-backed sources (text, llmc) read their train split in
// windows shuffled each epoch, keyed by `seed` (sequential_source.h); off,
// in file order, as they always have (the default here; the trainer passes
// its config's shuffle, on by default). The val split is always read in
// file order. The synthetic language ignores it: its windows are already
// independent draws, an endless stream with no stored order to shuffle.
std::unique_ptr<TokenSource> make_token_source(const std::string& spec, uint64_t seed,
                                               Split split = Split::train,
                                               StreamPart part = {}, bool shuffle = false);

// The text of the valid spec forms, for error messages and --help.
std::string token_source_spec_help();

namespace detail {
// Checks next_batch arguments; shared by all sources.
void check_batch_args(const char* who, const int32_t* windows, int64_t batch, int64_t seq);
void check_stream_part(StreamPart part);
// Throws naming `field` when state[field] is missing or differs from `expected`.
void expect_state_field(const nlohmann::json& state, const char* field,
                        const nlohmann::json& expected, const std::string& source);
}  // namespace detail

}  // namespace sdp::data
