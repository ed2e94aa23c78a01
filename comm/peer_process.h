// Local liveness of a group member's process, shared by the backends' watchdogs (gloo, nccl): a
// member on the same kernel and pid namespace can be checked directly: its process is gone (or a
// zombie). Not a cross-host detector: a member elsewhere is never judged (the backend's own
// errors, heartbeats and timeouts remain the detectors there).
#pragma once

#include <string>

namespace ds::comm {

// "<boot id>|<pid namespace>|<pid>" of this process.
std::string localProcessId();

// Whether the process named by id (from localProcessId() of some process) is known to be gone:
// same boot id and pid namespace as this process, and the pid no longer exists or is a zombie.
// False when it is elsewhere, alive, or id is malformed.
bool processGone(const std::string& id);

}  // namespace ds::comm
