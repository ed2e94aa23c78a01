// `dsrt export-checkpoint`: CLI over exportConsolidated, exportHuggingFace and exportLlmc; verifies
// the checkpoint's checksums first.
#include "runtime/cmd/export_checkpoint_command.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/export_formats.h"

namespace ds::runtime {

int exportCheckpointCommand(int argc, char** argv) {
  CLI::App app{"Write a checkpoint's consolidated fp32 weights for other tools",
               "export-checkpoint"};
  std::string dir, out, tag, format = "safetensors";
  ExportShape shape;
  app.add_option("dir", dir, "checkpoint root (holds 'latest' and the tag folders)")->required();
  app.add_option("out", out,
                 "output: a .safetensors file (safetensors), a folder (hf) or a .bin file (llmc)")
      ->required();
  app.add_option("--tag", tag, "checkpoint tag (default: the one named by <dir>/latest)");
  app.add_option("--format", format,
                 "safetensors: one file, our parameter names (llm.c's); hf: a Hugging Face "
                 "transformers GPT2LMHeadModel folder (config.json, model.safetensors); llmc: an "
                 "llm.c gpt2_*.bin (fp32)")
      ->check(CLI::IsMember({"safetensors", "hf", "llmc"}));
  app.add_option("--n_head", shape.nHead,
                 "hf/llmc: attention heads (default: recorded in the checkpoint's plan)");
  app.add_option("--vocab_size", shape.vocabSize,
                 "hf/llmc: real vocabulary, <= wte's rows (default: recorded in the checkpoint)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    throw ConfigError("export-checkpoint: " + std::string(e.what()));
  }
  if (tag.empty()) tag = readLatestTag(dir);
  if (format == "hf") exportHuggingFace(dir, tag, out, shape);
  else if (format == "llmc") exportLlmc(dir, tag, out, shape);
  else exportConsolidated(dir, tag, out);
  auto r = CheckpointReader::open(dir, tag);
  size_t n = 0;
  for (const auto& p : r->info().params) n += p.numel;
  std::printf(
      "wrote %s (%s): %zu tensors, %zu fp32 values, from %s/%s (step %lld, %d rank(s), ZeRO "
      "stage %d)\n",
      out.c_str(), format.c_str(), r->info().params.size(), n, dir.c_str(), tag.c_str(),
      static_cast<long long>(r->info().step), r->info().worldSize, r->info().zeroStage);
  return 0;
}

}  // namespace ds::runtime
