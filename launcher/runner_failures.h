// The first remote failure as pdsh and srun report it on their stderr: pdsh prints
// "pdsh@<me>: <host>: ssh exited with exit code N" when one host's command ends non-zero, srun
// prints "srun: error: <host>: task(s) <list>: Exited with exit code K" (or a signal's
// strsignal text). Pure parsers: nothing here watches a process; superviseCommand does.
// Invariant: a line that is not such a report gives nullopt (never a guess).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "launcher/job_spec.h"

namespace ds::launcher {

struct RemoteFailure {
  std::string host;    // as the tool names it
  int status = 0;      // the job status it implies: exit code, or 128+signal
  std::string detail;  // "ssh exited with exit code 3", "task 1: Exited with exit code 3"
};

// "pdsh@vm: 127.0.0.3: ssh exited with exit code 3" -> {127.0.0.3, 3}. pdsh reports a command
// killed by a signal as code 0 (WEXITSTATUS); that, like 255, means the host was lost: 255.
std::optional<RemoteFailure> parsePdshFailure(std::string_view line);

// "srun: error: vm: task 1: Exited with exit code 3" -> {vm, 3}; "...: tasks 0-1: Killed" ->
// {vm, 137} (the text is matched against strsignal).
std::optional<RemoteFailure> parseSrunFailure(std::string_view line);

// "host 127.0.0.3 (node 1, ranks 2-3)": where a failing host sits in the job (the host alone
// when it is not one of spec.hosts).
std::string describeJobHost(const JobSpec& spec, const std::string& host);

}  // namespace ds::launcher
