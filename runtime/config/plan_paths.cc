// resolvePlanPaths (see plan_loader.h): the one rule for relative paths in a plan.
#include <filesystem>

#include "runtime/config/plan_loader.h"

namespace ds::runtime {
namespace {

void resolve(std::string& path, const std::filesystem::path& base) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return;
  path = (base / path).lexically_normal().string();
}

}  // namespace

void resolvePlanPaths(Plan& plan, const std::string& baseDir) {
  const std::filesystem::path base(baseDir.empty() ? "." : baseDir);
  resolve(plan.initFrom, base);
  resolve(plan.data.shards, base);
  resolve(plan.data.val, base);
  resolve(plan.train.checkpointDir, base);
  auto& ds = plan.deepspeed;
  resolve(ds.zero.offloadOptimizer.nvmePath, base);
  resolve(ds.zero.offloadParam.nvmePath, base);
  resolve(ds.tensorboard.outputPath, base);
  resolve(ds.csvMonitor.outputPath, base);
}

}  // namespace ds::runtime
