// openRankDevice (see rank_device.h): count, select, activate, describe - in that order, so the
// description's free memory is measured on the context this rank will train in.
#include "runtime/device/rank_device.h"

namespace ds::runtime {

RankDevice openRankDevice(const DeviceRequest& req, DeviceSite site) {
  site.visibleDevices = req.mode == "cpu" ? 0 : visibleCudaDevices(&site.whyNone);
  RankDevice d;
  d.choice = selectDevice(req, site);
  if (!d.choice.cuda) {
    d.info = describeCpu();
    return d;
  }
  activateCudaDevice(d.choice.index, siteText(site));
  d.info = describeCudaDevice(d.choice.index);
  return d;
}

}  // namespace ds::runtime
