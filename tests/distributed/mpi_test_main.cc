// main() of the tests run under mpirun: every rank runs every test (they are collective); ranks
// other than 0 print only failures and the summary, so that the log stays readable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank == nullptr) rank = std::getenv("PMI_RANK");
  // Before InitGoogleTest, which sets up the printer (a --gtest_brief flag still wins).
  if (rank != nullptr && std::string(rank) != "0") GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
