// `dsrt export-checkpoint`: CLI over exportConsolidated; verifies the checkpoint's checksums first.
#include "runtime/cmd/export_checkpoint_command.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"

namespace ds::runtime {

int exportCheckpointCommand(int argc, char** argv) {
  CLI::App app{"Write one consolidated fp32 safetensors file from a checkpoint",
               "export-checkpoint"};
  std::string dir, out, tag;
  app.add_option("dir", dir, "checkpoint root (holds 'latest' and the tag folders)")->required();
  app.add_option("out", out, "output .safetensors path")->required();
  app.add_option("--tag", tag, "checkpoint tag (default: the one named by <dir>/latest)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    throw ConfigError("export-checkpoint: " + std::string(e.what()));
  }
  if (tag.empty()) tag = readLatestTag(dir);
  exportConsolidated(dir, tag, out);
  auto r = CheckpointReader::open(dir, tag);
  size_t n = 0;
  for (const auto& p : r->info().params) n += p.numel;
  std::printf(
      "wrote %s: %zu tensors, %zu fp32 values, from %s/%s (step %lld, %d rank(s), ZeRO "
      "stage %d)\n",
      out.c_str(), r->info().params.size(), n, dir.c_str(), tag.c_str(),
      static_cast<long long>(r->info().step), r->info().worldSize, r->info().zeroStage);
  return 0;
}

}  // namespace ds::runtime
