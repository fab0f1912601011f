// Tests of a wire's converters (ToRpc/FromRpc pairs between std-only structs and Cap'n
// Proto ones): a fully filled value survives the round trip field by field, and ToRpc sets
// every field of the schema struct, so that a field added on either side and forgotten by
// the converter fails a test.
//
// A test provides, in each struct's namespace (found by argument-dependent lookup):
//   auto Fields(const T&)   std::tie of every field, in declaration order, through a
//                           structured binding (so a new field stops it compiling)
// and a codec naming the converters: struct Codec { template <class T, class B> static
// void To(const T&, B); template <class R> static auto From(R); }.
#ifndef EMBER_COMMON_WIRE_TESTING_H_
#define EMBER_COMMON_WIRE_TESTING_H_

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <catch2/catch.hpp>

namespace ember::wire_testing {

// Fails naming each field of the schema struct `r` (and of the structs in it, lists'
// elements included) left at its default: empty text, an empty list, a primitive equal to
// the schema's default; but the fields named in `unset` (deliberately not carried).
void CheckEverySchemaFieldSet(capnp::DynamicStruct::Reader r, const std::string& path,
                              const std::set<std::string>& unset = {});

// Calls check(index, equal) for each field of `a` and `b`, in declaration order.
template <typename T, typename Check, size_t... I>
void CompareFields(const T& a, const T& b, const Check& check, std::index_sequence<I...>) {
  const auto fields_a = Fields(a);
  const auto fields_b = Fields(b);
  (check(I, std::get<I>(fields_a) == std::get<I>(fields_b)), ...);
}

template <typename T, typename Check>
void CompareFields(const T& a, const T& b, const Check& check) {
  constexpr size_t kFields = std::tuple_size<decltype(Fields(a))>::value;
  CompareFields(a, b, check, std::make_index_sequence<kFields>());
}

// Fails naming each field (its index in declaration order) of `filled` equal to a
// default-constructed T's.
template <typename T>
void CheckEveryFieldSet(const T& filled) {
  CompareFields(filled, T{}, [](size_t index, bool equal) {
    INFO("field #" << index << " of the filled value has its default value");
    CHECK_FALSE(equal);
  });
}

// Fails naming each field of `got` unlike the same field of `want`.
template <typename T>
void CheckSameFields(const T& got, const T& want) {
  CompareFields(got, want, [](size_t index, bool equal) {
    INFO("field #" << index << " differs after the round trip");
    CHECK(equal);
  });
}

// `value` written with the codec's To into a message, the message serialized and read
// back with its From.
template <typename Rpc, typename Codec, typename T>
T RoundTrip(const T& value) {
  capnp::MallocMessageBuilder message;
  Codec::To(value, message.initRoot<Rpc>());
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  capnp::FlatArrayMessageReader reader(words);
  return Codec::From(reader.getRoot<Rpc>());
}

template <typename Rpc, typename Codec, typename T>
void CheckSchemaFilledBy(const T& value, const std::set<std::string>& unset = {}) {
  capnp::MallocMessageBuilder message;
  auto builder = message.initRoot<Rpc>();
  Codec::To(value, builder);
  CheckEverySchemaFieldSet(capnp::toDynamic(builder.asReader()),
                           capnp::Schema::from<Rpc>().getShortDisplayName().cStr(), unset);
}

// The round trip keeps every field of a fully filled value, and To sets every field of the
// schema struct; a default value comes back as it was.
template <typename Rpc, typename Codec, typename T>
void CheckConverter(const T& filled) {
  CheckEveryFieldSet(filled);
  CheckSchemaFilledBy<Rpc, Codec>(filled);
  CheckSameFields(RoundTrip<Rpc, Codec>(filled), filled);
  CheckSameFields(RoundTrip<Rpc, Codec>(T{}), T{});
}

}  // namespace ember::wire_testing

#endif  // EMBER_COMMON_WIRE_TESTING_H_
