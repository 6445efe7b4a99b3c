#include "examples/data/vocabulary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/examples/data/data_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::examples {
namespace {

using ::cavs::examples::testing::Has;
using ::cavs::examples::testing::Msg;
using ::cavs::examples::testing::WriteTemp;

Vocabulary Sample() {
  WordCounter counter;
  counter.AddAll({"the", "cat", "the", "dog", "the", "cat", "emu", "<unk>", "ant", "ant"});
  return Vocabulary::FromCounts(counter.counts(), 2);
}

TEST(VocabularyTest, MinCountOrderAndUnk) {
  const Vocabulary v = Sample();
  // "<unk>" first, then by decreasing count, ties in byte order; "dog" and "emu" (1) dropped.
  ASSERT_EQ(v.size(), 4);
  EXPECT_EQ(v.Word(0), "<unk>");
  EXPECT_EQ(v.Word(1), "the");
  EXPECT_EQ(v.Word(2), "ant");
  EXPECT_EQ(v.Word(3), "cat");
  EXPECT_EQ(v.Id("cat"), 3);
  EXPECT_EQ(v.Id("dog"), Vocabulary::kUnkId);
  EXPECT_EQ(v.Id("<unk>"), Vocabulary::kUnkId);
  EXPECT_TRUE(v.Contains("ant"));
  EXPECT_FALSE(v.Contains("emu"));
  EXPECT_EQ(Vocabulary().size(), 1);
}

TEST(VocabularyTest, MinCountOneKeepsEverythingAndReservedComeFirst) {
  WordCounter counter;
  counter.AddAll({"b", "a", "b", "</s>"});
  const Vocabulary v = Vocabulary::FromCounts(counter.counts(), 1, {"<s>", "</s>"});
  ASSERT_EQ(v.size(), 5);
  EXPECT_EQ(v.Word(1), "<s>");
  EXPECT_EQ(v.Word(2), "</s>");
  EXPECT_EQ(v.Word(3), "b");
  EXPECT_EQ(v.Word(4), "a");
}

TEST(VocabularyTest, SaveLoadRoundTrip) {
  const Vocabulary v = Sample();
  const std::string path = cavs::tests::TempPath("vocab_rt.txt");
  ASSERT_TRUE(v.Save(path).ok());
  absl::StatusOr<Vocabulary> loaded = Vocabulary::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), v.size());
  for (int32_t id = 0; id < v.size(); ++id) EXPECT_EQ(loaded->Word(id), v.Word(id));
  EXPECT_EQ(loaded->Id("cat"), v.Id("cat"));
  // CRLF files load the same.
  absl::StatusOr<Vocabulary> crlf = Vocabulary::Load(WriteTemp("vocab_crlf.txt", "<unk>\r\nx\r\n"));
  ASSERT_TRUE(crlf.ok()) << crlf.status();
  EXPECT_EQ(crlf->Id("x"), 1);
}

TEST(VocabularyTest, LoadErrorsNameFileAndLine) {
  struct Case {
    const char* name;
    std::string text;
    std::string message;  // after "path:"
  };
  const std::vector<Case> cases = {
      {"v1.txt", "the\n<unk>\n", "1:1: first token must be '<unk>', got 'the'"},
      {"v2.txt", "<unk>\na\nb\na\n", "4:1: duplicate token 'a' (first on line 2)"},
      {"v3.txt", "<unk>\na\n\nb\n", "3:1: empty token"},
      {"v4.txt", "<unk>\na b\n", "2:1: invalid token 'a b' (whitespace or control byte)"},
      {"v5.txt", std::string("<unk>\na\0b\n", 10),
       "2:1: invalid token 'a\\x00\\x62' (whitespace or control byte)"},
      {"v6.txt", "<unk>\n<unk>\n", "2:1: duplicate token '<unk>' (first on line 1)"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteTemp(c.name, c.text);
    absl::StatusOr<Vocabulary> v = Vocabulary::Load(path);
    ASSERT_FALSE(v.ok()) << c.name;
    EXPECT_EQ(Msg(v.status()), path + ":" + c.message);
  }
  const std::string empty = WriteTemp("v_empty.txt", "");
  EXPECT_EQ(Msg(Vocabulary::Load(empty).status()), empty + ": empty vocabulary file");
  absl::StatusOr<Vocabulary> missing = Vocabulary::Load(empty + ".missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Has(missing.status().message(), "v_empty.txt.missing"));
}

// The in-memory form a checkpoint carries: the file's text, read back with the file's errors.
TEST(VocabularyTest, TextRoundTripAndFromWords) {
  const Vocabulary v = Sample();
  const std::string text = v.ToText();
  EXPECT_EQ(text.substr(0, 6), "<unk>\n");
  absl::StatusOr<Vocabulary> back = Vocabulary::FromText(text, "ckpt");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), v.size());
  for (int32_t id = 0; id < v.size(); ++id) EXPECT_EQ(back->Word(id), v.Word(id));
  EXPECT_EQ(back->ToText(), text);
  EXPECT_EQ(Msg(Vocabulary::FromText("<unk>\na\na\n", "ckpt").status()),
            "ckpt:3:1: duplicate token 'a' (first on line 2)");
  absl::StatusOr<Vocabulary> words = Vocabulary::FromWords({"x", "y"}, "w");
  ASSERT_TRUE(words.ok());
  EXPECT_EQ(words->Id("y"), 2);
  EXPECT_EQ(Msg(Vocabulary::FromWords({"x", "a b"}, "w").status()), "w:3:1: invalid token 'a b'");
}

TEST(VocabularyTest, SaveRefusesUnrepresentableTokens) {
  WordCounter counter;
  counter.Add("two words");
  const Vocabulary v = Vocabulary::FromCounts(counter.counts(), 1);
  const absl::Status s = v.Save(cavs::tests::TempPath("vocab_bad.txt"));
  EXPECT_TRUE(Has(s.message(), "cannot save token 1 'two words'"));
  EXPECT_FALSE(IsValidToken(""));
  EXPECT_FALSE(IsValidToken("a\tb"));
  EXPECT_TRUE(IsValidToken("caf\xc3\xa9"));
}

}  // namespace
}  // namespace cavs::examples
