#include "common/wire_testing.h"

namespace ember::wire_testing {
namespace {

void CheckValueSet(capnp::DynamicValue::Reader value, capnp::Type type, const std::string& path,
                   const std::set<std::string>& unset) {
  INFO(path);
  switch (type.which()) {
    case capnp::schema::Type::TEXT:
      CHECK(value.as<capnp::Text>().size() > 0);
      break;
    case capnp::schema::Type::DATA:
      CHECK(value.as<capnp::Data>().size() > 0);
      break;
    case capnp::schema::Type::STRUCT:
      CheckEverySchemaFieldSet(value.as<capnp::DynamicStruct>(), path, unset);
      break;
    case capnp::schema::Type::LIST: {
      auto list = value.as<capnp::DynamicList>();
      CHECK(list.size() > 0);
      const capnp::Type element = type.asList().getElementType();
      for (uint32_t i = 0; i < list.size(); ++i)
        CheckValueSet(list[i], element, path + "[" + std::to_string(i) + "]", unset);
      break;
    }
    default:
      break;  // primitives: checked by the caller, which knows the field's default
  }
}

}  // namespace

void CheckEverySchemaFieldSet(capnp::DynamicStruct::Reader r, const std::string& path,
                              const std::set<std::string>& unset) {
  for (capnp::StructSchema::Field field : r.getSchema().getFields()) {
    const std::string field_name = field.getProto().getName().cStr();
    if (unset.count(field_name) != 0) continue;
    const std::string name = path + "." + field_name;
    const capnp::Type type = field.getType();
    if (type.isText() || type.isData() || type.isStruct() || type.isList()) {
      INFO(name << " is null");
      CHECK(r.has(field));
      if (r.has(field)) CheckValueSet(r.get(field), type, name, unset);
    } else {
      INFO(name << " has its default value");
      CHECK(r.has(field, capnp::HasMode::NON_DEFAULT));
    }
  }
}

}  // namespace ember::wire_testing
