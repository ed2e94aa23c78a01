// selectDevice: train.device and the rank's place on its node -> cpu or cuda:<index>, with the
// errors of docs/gpu.md. The texts name the plan key to change, so a user can act on one line.
#include "runtime/device/device_select.h"

#include <fmt/format.h>

#include "core/core_knobs.h"
#include "core/error.h"

namespace ds::runtime {
namespace {

std::string visibleText(const DeviceSite& s) {
  if (!s.cudaVisibleDevices) return "";
  return fmt::format(", CUDA_VISIBLE_DEVICES='{}'", *s.cudaVisibleDevices);
}

[[noreturn]] void throwNoDevice(const DeviceSite& s) {
  std::string why = s.whyNone.empty() ? "no CUDA device is visible" : s.whyNone;
  throw ConfigError(fmt::format(
      "train.device is 'cuda' but {} sees no CUDA device: {}{}. Check the driver (nvidia-smi) "
      "and CUDA_VISIBLE_DEVICES, or set train.device to auto or cpu",
      siteText(s), why, visibleText(s)));
}

[[noreturn]] void throwTooFew(const DeviceSite& s) {
  throw ConfigError(fmt::format(
      "{}: {} local ranks but {} visible CUDA device(s){}; start at most {} ranks per node, or "
      "set train.device_sharing: true to let ranks share a device (cuda:<LOCAL_RANK mod {}>; "
      "for tests)",
      siteText(s), s.localSize, s.visibleDevices, visibleText(s), s.visibleDevices,
      s.visibleDevices));
}

}  // namespace

std::string siteText(const DeviceSite& s) {
  return fmt::format("rank {} (LOCAL_RANK {}) on {}", s.rank, s.localRank, s.host);
}

std::string DeviceChoice::name() const { return cuda ? fmt::format("cuda:{}", index) : "cpu"; }

DeviceChoice selectDevice(const DeviceRequest& req, const DeviceSite& site) {
  DeviceChoice c;
  if (req.mode != "auto" && req.mode != "cpu" && req.mode != "cuda")
    throw InternalError(fmt::format("train.device '{}' reached selectDevice", req.mode));
  if (req.mode == "cpu") {
    c.why = "cpu (train.device cpu)";
    return c;
  }
  if (site.visibleDevices <= 0) {
    if (req.mode == "cuda") throwNoDevice(site);
    c.why = fmt::format("cpu (train.device auto: {})",
                        site.whyNone.empty() ? "no CUDA device is visible" : site.whyNone);
    return c;
  }
  if (site.localSize > site.visibleDevices && !req.allowSharing) throwTooFew(site);
  c.cuda = true;
  c.index = site.localRank % site.visibleDevices;
  c.why = fmt::format("cuda:{} (train.device {}, LOCAL_RANK {}, {} visible device(s){}{})", c.index,
                      req.mode, site.localRank, site.visibleDevices,
                      site.localSize > site.visibleDevices ? ", shared: train.device_sharing" : "",
                      visibleText(site));
  return c;
}

int parseLocalRank(const EnvSource& env, int localSize) {
  if (localSize < 1) throw InternalError(fmt::format("parseLocalRank: localSize {}", localSize));
  return static_cast<int>(knobIntIn(knobs::kLocalRank, 0, localSize - 1, env).value_or(0));
}

}  // namespace ds::runtime
