// openTap, enterNetns (see tap_device.h): the only ioctl and setns calls of the delay line.
#include "tests/cluster/tap_device.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>

#include <cstring>

#include "core/error.h"

namespace ds::netdelay {

launcher::UniqueFd openTap(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ)
    throw ConfigError("TAP device name '" + name + "': expected 1.." +
                      std::to_string(IFNAMSIZ - 1) + " characters");
  // TUNSETIFF would create a missing device: a typo must fail instead of forwarding to nowhere.
  if (::if_nametoindex(name.c_str()) == 0)
    throw ConfigError("no network device '" + name +
                      "' in this namespace: expected a TAP device (ip tuntap add dev " + name +
                      " mode tap)");
  launcher::UniqueFd tun(DS_SYS_CHECK(::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC),
                                      "open /dev/net/tun for TAP device {}", name));
  ifreq request{};
  std::memcpy(request.ifr_name, name.data(), name.size());
  request.ifr_flags = IFF_TAP | IFF_NO_PI;
  DS_SYS_CHECK(::ioctl(tun.get(), TUNSETIFF, &request),
               "attach to TAP device {} (TUNSETIFF; it must exist: ip tuntap add dev {} mode tap)",
               name, name);
  return tun;
}

void enterNetns(const std::string& path) {
  launcher::UniqueFd nsFd(
      DS_SYS_CHECK(::open(path.c_str(), O_RDONLY | O_CLOEXEC), "open network namespace {}", path));
  DS_SYS_CHECK(::setns(nsFd.get(), CLONE_NEWNET), "enter network namespace {} (setns)", path);
}

}  // namespace ds::netdelay
