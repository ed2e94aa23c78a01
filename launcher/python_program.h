// How dsrun starts a Python program the way DeepSpeed's launcher does
// (deepspeed/launcher/launch.py): `dsrun train.py ARGS` runs `<python3> -u train.py --local_rank=N
// ARGS`, `--module pkg` runs
// `<python3> -u -m pkg --local_rank=N ARGS`, `--no_python prog` executes prog as given with
// `--local_rank=N` right after it, and `dsrun python3 [opts] train.py ARGS` gets the argument right
// after the script (or `-m mod` / `-c cmd`). Any other program (dsrt, a binary, a shell) keeps
// dsrun's rule: `--local_rank=N` after all its arguments. Pure functions; not the rank environment
// (rank_plan.h).
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

// The program as it will be executed and where `--local_rank=N` goes in it.
struct ProgramForm {
  std::vector<std::string> program;
  int localRankAt = -1;  // index the argument is inserted at; -1 = after every argument
};

// True for `python`, `python3`, `python3.11` (any folder in front).
bool isPythonInterpreter(const std::string& argv0);

// For `python [options] script|-m mod|-c cmd|- ARGS`: the index just after the script (or the
// module / command); the end of the line when it has no script (an interactive interpreter).
// -1 when program[0] is not a Python interpreter.
int pythonScriptEnd(const std::vector<std::string>& program);

// Applies DeepSpeed's rules above. `python` is the interpreter put in front of a `.py` script or a
// --module (DeepSpeed uses its own sys.executable; dsrun uses python3 from its PATH). Throws
// ConfigError for --module with --no_python (DeepSpeed's text) or --module without a name.
ProgramForm pythonProgramForm(const std::vector<std::string>& program, bool module, bool noPython,
                              const std::string& python);

}  // namespace ds::launcher
