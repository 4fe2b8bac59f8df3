#include <gtest/gtest.h>

#include "gpuscout/util/names.hpp"

namespace gpuscout {
namespace {

TEST(NormalizeName, DropsCasePunctuationAndVendor) {
  EXPECT_EQ(normalize_name("NVIDIA H100-SXM5 80GB"), "h100sxm580gb");
  EXPECT_EQ(normalize_name("h100_sxm5_80gb"), "h100sxm580gb");
  EXPECT_EQ(normalize_name("AMD MI300X"), "mi300x");
  EXPECT_EQ(normalize_name("nvidia"), "nvidia");  // a bare vendor name stays
}

TEST(EditDistance, CountsEdits) {
  EXPECT_EQ(edit_distance("h100", "h100"), 0u);
  EXPECT_EQ(edit_distance("h100", "h200"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(NameIndex, FindsThroughAliasesCaseInsensitively) {
  NameIndex index;
  EXPECT_FALSE(index.add(0, "H100-SXM5-80GB", {"h100", "H100 SXM"}));
  EXPECT_FALSE(index.add(1, "H200-SXM-141GB", {"h200"}));
  EXPECT_EQ(index.find("h100"), 0u);
  EXPECT_EQ(index.find("H100 SXM"), 0u);
  EXPECT_EQ(index.find("h100-sxm5-80gb"), 0u);
  EXPECT_EQ(index.find("NVIDIA H200"), 1u);
  EXPECT_FALSE(index.find("h300"));
}

TEST(NameIndex, RejectsDuplicateNamesAndAliases) {
  NameIndex index;
  EXPECT_FALSE(index.add(0, "H100-SXM5-80GB", {"h100"}));
  auto clash = index.add(1, "H100-PCIe-80GB", {"H100"});
  ASSERT_TRUE(clash);
  EXPECT_EQ(*clash, "H100-SXM5-80GB");
  // Nothing of the rejected entry was registered.
  EXPECT_FALSE(index.find("H100-PCIe-80GB"));
}

TEST(NameIndex, SuggestsClosestNames) {
  NameIndex index;
  index.add(0, "H100-SXM5-80GB", {"h100"});
  index.add(1, "H200-SXM-141GB", {"h200"});
  index.add(2, "A100-SXM4-80GB", {"a100"});
  const auto suggestions = index.suggest("h10");
  ASSERT_FALSE(suggestions.empty());
  EXPECT_EQ(suggestions.front(), "H100-SXM5-80GB");
  EXPECT_TRUE(index.suggest("completely-unrelated-name-xyz").empty());
}

}  // namespace
}  // namespace gpuscout
