#include "examples/data/text_reader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "scheduler/graph.h"
#include "tests/examples/data/data_test_util.h"
#include "tests/testing/temp_dir.h"

namespace cavs::examples {
namespace {

using ::cavs::examples::testing::FileExists;
using ::cavs::examples::testing::Msg;
using ::cavs::examples::testing::WriteTemp;

constexpr char kTrain[] = " the cat sat \n\n \t \n the dog sat on the cat\n a <unk> ran\n";

Vocabulary TrainVocab() {
  absl::StatusOr<Vocabulary> v = BuildTextVocabulary(WriteTemp("lm_train.txt", kTrain));
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *std::move(v) : Vocabulary();
}

TEST(TextReaderTest, VocabularyFromTrainingFile) {
  const Vocabulary v = TrainVocab();
  // <unk> <s> </s>, then the(3) cat(2) sat(2), then a dog on ran (1 each, byte order).
  const std::vector<std::string> expected = {"<unk>", "<s>", "</s>", "the", "cat",
                                             "sat",   "a",   "dog",  "on",  "ran"};
  ASSERT_EQ(v.size(), static_cast<int32_t>(expected.size()));
  for (int32_t id = 0; id < v.size(); ++id) EXPECT_EQ(v.Word(id), expected[id]);
  absl::StatusOr<Vocabulary> frequent = BuildTextVocabulary(WriteTemp("lm_train.txt", kTrain), 2);
  ASSERT_TRUE(frequent.ok());
  EXPECT_EQ(frequent->size(), 6);
}

TEST(TextReaderTest, SentencesAreChainsPredictingTheNextWord) {
  const Vocabulary v = TrainVocab();
  absl::StatusOr<std::vector<TextSentence>> s = ReadTextString(kTrain, v);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);  // blank and whitespace-only lines skipped
  const TextSentence& first = (*s)[0];
  EXPECT_EQ(first.words, (std::vector<std::string>{"the", "cat", "sat"}));
  const scheduler::Graph& g = first.graph;
  ASSERT_EQ(g.num_vertices(), 4);
  EXPECT_EQ(g.child(0, 0), -1);
  for (int t = 1; t < 4; ++t) {
    EXPECT_EQ(g.num_children(t), 1);
    EXPECT_EQ(g.child(t, 0), t - 1);
  }
  const int32_t bos = v.Id("<s>"), eos = v.Id("</s>");
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{bos, v.Id("the"), v.Id("cat"), v.Id("sat")}));
  EXPECT_EQ(g.labels, (std::vector<int32_t>{v.Id("the"), v.Id("cat"), v.Id("sat"), eos}));
  EXPECT_TRUE(scheduler::ValidateGraph(g, 0, 1).ok());
  EXPECT_EQ(g.Roots(), (std::vector<int32_t>{3}));
  // "<unk>" in the text is the unknown token.
  EXPECT_EQ((*s)[2].graph.tokens[2], Vocabulary::kUnkId);
}

TEST(TextReaderTest, SentenceChainPredictsTheNextToken) {
  scheduler::Graph g = SentenceChain({7, 8}, /*begin=*/1, /*end=*/2);
  ASSERT_EQ(g.num_vertices(), 3);
  EXPECT_EQ(g.tokens, (std::vector<int32_t>{1, 7, 8}));
  EXPECT_EQ(g.labels, (std::vector<int32_t>{7, 8, 2}));
  EXPECT_EQ(g.child(2, 0), 1);
  EXPECT_EQ(g.child(0, 0), -1);
}

TEST(TextReaderTest, WithoutBeginTokenAndUnknownWords) {
  const Vocabulary v = TrainVocab();
  TextReadOptions options;
  options.add_begin_token = false;
  absl::StatusOr<std::vector<TextSentence>> s = ReadTextString("zebra\tcat\n", v, options);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].graph.tokens, (std::vector<int32_t>{Vocabulary::kUnkId, v.Id("cat")}));
  EXPECT_EQ((*s)[0].graph.labels, (std::vector<int32_t>{v.Id("cat"), v.Id("</s>")}));
}

// Sentences from memory give the vocabulary and the chains that the same text read from a file
// gives.
TEST(TextReaderTest, SentencesFromWordsInMemoryMatchTheFileReader) {
  absl::StatusOr<std::vector<std::vector<std::string>>> words =
      ReadTextWords(WriteTemp("lm_words.txt", kTrain));
  ASSERT_TRUE(words.ok()) << words.status();
  const Vocabulary from_words = BuildTextVocabularyFromWords(*words);
  const Vocabulary from_file = TrainVocab();
  ASSERT_EQ(from_words.size(), from_file.size());
  for (int32_t id = 0; id < from_file.size(); ++id) {
    EXPECT_EQ(from_words.Word(id), from_file.Word(id));
  }
  EXPECT_EQ(BuildTextVocabularyFromWords(*words, 2).size(), 6);
  absl::StatusOr<std::vector<TextSentence>> read = ReadTextString(kTrain, from_file);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), words->size());
  for (size_t i = 0; i < words->size(); ++i) {
    absl::StatusOr<TextSentence> made = MakeTextSentence((*words)[i], from_words);
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_EQ(made->words, (*read)[i].words);
    EXPECT_EQ(made->graph.child_offsets, (*read)[i].graph.child_offsets);
    EXPECT_EQ(made->graph.child_ids, (*read)[i].graph.child_ids);
    EXPECT_EQ(made->graph.tokens, (*read)[i].graph.tokens);
    EXPECT_EQ(made->graph.labels, (*read)[i].graph.labels);
  }
  // No words: <s> predicting </s>, or without <s> nothing to build.
  absl::StatusOr<TextSentence> empty = MakeTextSentence({}, from_words);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->graph.tokens, (std::vector<int32_t>{from_words.Id("<s>")}));
  EXPECT_EQ(empty->graph.labels, (std::vector<int32_t>{from_words.Id("</s>")}));
  EXPECT_EQ(Msg(MakeTextSentence({}, from_words, /*add_begin_token=*/false).status()),
            "a sentence without words and without a begin token has no vertex");
  EXPECT_EQ(Msg(MakeTextSentence({"the"}, Vocabulary()).status()),
            "vocabulary for a sentence lacks </s>");
  const Vocabulary no_begin = Vocabulary::FromCounts({{"the", 1}}, 1, {"</s>"});
  EXPECT_EQ(Msg(MakeTextSentence({"the"}, no_begin).status()),
            "vocabulary for a sentence lacks <s>");
  EXPECT_TRUE(MakeTextSentence({"the"}, no_begin, /*add_begin_token=*/false).ok());
}

// A UTF-8 byte order mark at the start of the file is not a word (LineReader skips it).
TEST(TextReaderTest, ByteOrderMarkIsNotAWord) {
  absl::StatusOr<std::vector<std::vector<std::string>>> words =
      ReadTextWords(WriteTemp("lm_bom.txt", "\xEF\xBB\xBFthe cat\nsat\n"));
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, (std::vector<std::vector<std::string>>{{"the", "cat"}, {"sat"}}));
}

TEST(TextReaderTest, Errors) {
  const Vocabulary v = TrainVocab();
  absl::StatusOr<std::vector<TextSentence>> s =
      ReadTextString(std::string("a b\nthe c\0t\n", 11), v, {}, "p.txt");
  EXPECT_EQ(Msg(s.status()), "p.txt:2:6: invalid control byte '\\x00'");
  TextReadOptions small;
  small.max_line_bytes = 8;
  s = ReadTextString("a b\nthe cat sat\n", v, small, "p.txt");
  EXPECT_EQ(Msg(s.status()), "p.txt:2:9: line longer than 8 bytes");
  s = ReadTextString("a b\n", Vocabulary(), {}, "p.txt");
  EXPECT_EQ(Msg(s.status()), "vocabulary for 'p.txt' lacks </s>");
  EXPECT_EQ(ReadTextFile(cavs::tests::TempPath("none.txt"), v).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TextReaderTest, LoadDataset) {
  const std::string train = WriteTemp("lm_ds_train.txt", kTrain);
  const std::string valid = WriteTemp("lm_ds_valid.txt", "the emu sat\n");
  absl::StatusOr<TextDataset> d = LoadTextDataset(train, valid);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size(), 3u);
  ASSERT_EQ(d->valid.size(), 1u);
  EXPECT_TRUE(d->test.empty());
  EXPECT_EQ(d->valid[0].graph.tokens[2], Vocabulary::kUnkId);  // "emu" is not in train
  const std::string empty = WriteTemp("lm_ds_empty.txt", "\n\n");
  EXPECT_EQ(Msg(LoadTextDataset(empty, valid).status()), "no sentences in '" + empty + "'");
}

TEST(TextReaderTest, RealPtbValid) {
  const char* env = std::getenv("CAVS_PTB_DIR");
  const std::string path =
      std::string(env != nullptr ? env : CAVS_SOURCE_DIR "/../shared/data/ptb") + "/valid.txt";
  if (!FileExists(path)) GTEST_SKIP() << "no " << path << " (set CAVS_PTB_DIR)";
  absl::StatusOr<TextDataset> d = LoadTextDataset(path, "");
  ASSERT_TRUE(d.ok()) << d.status();
  int64_t words = 0;
  for (const TextSentence& s : d->train) words += static_cast<int64_t>(s.words.size());
  std::printf("PTB valid: %zu sentences, %lld words, vocabulary %d\n", d->train.size(),
              static_cast<long long>(words), d->vocabulary.size());
  EXPECT_EQ(d->train.size(), 3370u);
  EXPECT_EQ(d->vocabulary.Id("<unk>"), Vocabulary::kUnkId);
}

}  // namespace
}  // namespace cavs::examples
