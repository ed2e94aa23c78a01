// Uses an installed dsrun from core (dtypes), comm's store and comm's backend registry; prints
// what it got so tests/build/install_test.sh can check it.
#include <chrono>
#include <cstdio>
#include <string>

#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/dtype.h"
#include "ds/config.h"

int main() {
  const float back = ds::bf16ToFloat(ds::floatToBf16(1.5f));
  ds::comm::HashStore store;
  store.set("key", ds::comm::Bytes{'o', 'k'});
  const ds::comm::Bytes got = store.get("key", std::chrono::milliseconds(1000));
  std::printf("consumer: dsrun %s %s %s(1.5)=%g store=%s backend=%s\n", DS_VERSION,
              std::string(ds::dtypeName(ds::DType::kF32)).c_str(),
              std::string(ds::dtypeName(ds::DType::kBF16)).c_str(), static_cast<double>(back),
              std::string(got.begin(), got.end()).c_str(), ds::comm::defaultBackendName().c_str());
  return 0;
}
