// LinePrefixer (see line_prefixer.h).
#include "launcher/agent/line_prefixer.h"

#include <cstring>

namespace ds::launcher {

void LinePrefixer::emit(const char* begin, size_t len, std::string* out) {
  out->append(prefix_);
  out->append(begin, len);
  out->push_back('\n');
}

void LinePrefixer::feed(const char* data, size_t n, std::string* out) {
  const char* p = data;
  const char* end = data + n;
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (nl == nullptr) {
      partial_.append(p, static_cast<size_t>(end - p));
      while (partial_.size() >= maxLine_) {
        emit(partial_.data(), maxLine_, out);
        partial_.erase(0, maxLine_);
      }
      return;
    }
    if (partial_.empty()) {
      size_t len = static_cast<size_t>(nl - p);
      for (; len > maxLine_; len -= maxLine_, p += maxLine_) emit(p, maxLine_, out);
      emit(p, len, out);
    } else {
      partial_.append(p, static_cast<size_t>(nl - p));
      size_t off = 0;
      for (; partial_.size() - off > maxLine_; off += maxLine_)
        emit(partial_.data() + off, maxLine_, out);
      emit(partial_.data() + off, partial_.size() - off, out);
      partial_.clear();
    }
    p = nl + 1;
  }
}

void LinePrefixer::finish(std::string* out) {
  if (partial_.empty()) return;
  emit(partial_.data(), partial_.size(), out);
  partial_.clear();
}

}  // namespace ds::launcher
