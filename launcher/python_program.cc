// DeepSpeed's program forms for Python scripts (see python_program.h).
#include "launcher/python_program.h"

#include "core/error.h"

namespace ds::launcher {

namespace {

bool endsWith(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// One option word of a Python command line at `at`: returns the index of the next word to look at,
// or sets *scriptEnd when the word (or the one after it) ends the interpreter's own options.
size_t pythonOption(const std::vector<std::string>& p, size_t at, int* scriptEnd) {
  const std::string& word = p[at];
  if (word == "-") {  // script from stdin
    *scriptEnd = static_cast<int>(at + 1);
    return at + 1;
  }
  if (word == "--") {  // the next word is the script
    *scriptEnd = static_cast<int>(std::min(at + 2, p.size()));
    return at + 2;
  }
  if (word.rfind("--", 0) == 0)  // --check-hash-based-pycs MODE; other long options are flags
    return word == "--check-hash-based-pycs" ? at + 2 : at + 1;
  for (size_t c = 1; c < word.size(); ++c) {
    char opt = word[c];
    bool attached = c + 1 < word.size();
    if (opt == 'c' || opt == 'm') {  // -m mod / -c cmd end the options; -mmod, -ccmd attached
      *scriptEnd = static_cast<int>(std::min(attached ? at + 1 : at + 2, p.size()));
      return p.size();
    }
    if (opt == 'W' || opt == 'X') return attached ? at + 1 : at + 2;
  }
  return at + 1;
}

}  // namespace

bool isPythonInterpreter(const std::string& argv0) {
  std::string base = argv0.substr(argv0.rfind('/') == std::string::npos ? 0 : argv0.rfind('/') + 1);
  if (base.rfind("python", 0) != 0) return false;
  return base.find_first_not_of("0123456789.", 6) == std::string::npos;
}

int pythonScriptEnd(const std::vector<std::string>& program) {
  if (program.empty() || !isPythonInterpreter(program[0])) return -1;
  int scriptEnd = -1;
  size_t at = 1;
  while (at < program.size() && scriptEnd < 0) {
    if (program[at].size() < 1 || program[at][0] != '-') return static_cast<int>(at + 1);
    at = pythonOption(program, at, &scriptEnd);
  }
  return scriptEnd >= 0 ? scriptEnd : static_cast<int>(program.size());
}

ProgramForm pythonProgramForm(const std::vector<std::string>& program, bool module, bool noPython,
                              const std::string& python) {
  if (module && noPython)
    throw ConfigError(
        "Don't use both the '--no_python' flag and the '--module' flag at the same time.");
  if (program.empty()) return {};
  if (noPython) return {program, 1};
  if (module || endsWith(program[0], ".py")) {
    ProgramForm form;
    form.program = {python, "-u"};
    if (module) form.program.push_back("-m");
    form.program.insert(form.program.end(), program.begin(), program.end());
    form.localRankAt = static_cast<int>(form.program.size() - program.size() + 1);
    return form;
  }
  return {program, pythonScriptEnd(program)};
}

}  // namespace ds::launcher
