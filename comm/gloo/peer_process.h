// Local liveness of a group member's process, for the gloo watchdog. libgloo does not wake a rank
// blocked sending to (or receiving from another rank than) a peer that died, so a collective can
// sit out the whole timeout with the dead peer's neighbours blocked elsewhere. A member on the same
// kernel and pid namespace can be checked directly: its process is gone (or a zombie).
// Not a cross-host detector: a member elsewhere is never judged (gloo's own errors and the
// timeout remain the detectors there).
#pragma once

#include <string>

namespace ds::comm::gloo_impl {

// "<boot id>|<pid namespace>|<pid>" of this process.
std::string localProcessId();

// Whether the process named by id (from localProcessId() of some process) is known to be gone:
// same boot id and pid namespace as this process, and the pid no longer exists or is a zombie.
// False when it is elsewhere, alive, or id is malformed.
bool processGone(const std::string& id);

}  // namespace ds::comm::gloo_impl
