#include "ggml/ggml_types.h"

#include <algorithm>
#include <cctype>

namespace swz::ggml {
namespace {

// Block sizes and byte sizes from ggml-common.h (static_asserts on the block_* structs).
constexpr TypeInfo kUnknown{"unknown", 1, 0, false, false};

const TypeInfo* lookup(Type t) {
  static const TypeInfo f32{"f32", 1, 4, true, true};
  static const TypeInfo f16{"f16", 1, 2, true, true};
  static const TypeInfo bf16{"bf16", 1, 2, true, true};
  static const TypeInfo q4_0{"q4_0", 32, 18, true, true};
  static const TypeInfo q4_1{"q4_1", 32, 20, true, true};
  static const TypeInfo q5_0{"q5_0", 32, 22, true, true};
  static const TypeInfo q5_1{"q5_1", 32, 24, true, true};
  static const TypeInfo q8_0{"q8_0", 32, 34, true, true};
  static const TypeInfo q8_1{"q8_1", 32, 36, true, false};
  static const TypeInfo q2_k{"q2_K", QK_K, 84, true, false};
  static const TypeInfo q3_k{"q3_K", QK_K, 110, true, false};
  static const TypeInfo q4_k{"q4_K", QK_K, 144, true, true};
  static const TypeInfo q5_k{"q5_K", QK_K, 176, true, true};
  static const TypeInfo q6_k{"q6_K", QK_K, 210, true, true};
  static const TypeInfo q8_k{"q8_K", QK_K, 292, true, false};
  static const TypeInfo iq2_xxs{"iq2_xxs", QK_K, 66, true, false};
  static const TypeInfo iq2_xs{"iq2_xs", QK_K, 74, true, false};
  static const TypeInfo iq3_xxs{"iq3_xxs", QK_K, 98, true, false};
  static const TypeInfo iq1_s{"iq1_s", QK_K, 50, true, false};
  static const TypeInfo iq4_nl{"iq4_nl", 32, 18, true, false};
  static const TypeInfo iq3_s{"iq3_s", QK_K, 110, true, false};
  static const TypeInfo iq2_s{"iq2_s", QK_K, 82, true, false};
  static const TypeInfo iq4_xs{"iq4_xs", QK_K, 136, true, false};
  static const TypeInfo i8{"i8", 1, 1, true, false};
  static const TypeInfo i16{"i16", 1, 2, true, false};
  static const TypeInfo i32{"i32", 1, 4, true, false};
  static const TypeInfo i64{"i64", 1, 8, true, false};
  static const TypeInfo f64{"f64", 1, 8, true, false};
  static const TypeInfo iq1_m{"iq1_m", QK_K, 56, true, false};
  static const TypeInfo tq1_0{"tq1_0", QK_K, 54, true, false};
  static const TypeInfo tq2_0{"tq2_0", QK_K, 66, true, false};
  switch (t) {
    case Type::F32: return &f32;
    case Type::F16: return &f16;
    case Type::BF16: return &bf16;
    case Type::Q4_0: return &q4_0;
    case Type::Q4_1: return &q4_1;
    case Type::Q5_0: return &q5_0;
    case Type::Q5_1: return &q5_1;
    case Type::Q8_0: return &q8_0;
    case Type::Q8_1: return &q8_1;
    case Type::Q2_K: return &q2_k;
    case Type::Q3_K: return &q3_k;
    case Type::Q4_K: return &q4_k;
    case Type::Q5_K: return &q5_k;
    case Type::Q6_K: return &q6_k;
    case Type::Q8_K: return &q8_k;
    case Type::IQ2_XXS: return &iq2_xxs;
    case Type::IQ2_XS: return &iq2_xs;
    case Type::IQ3_XXS: return &iq3_xxs;
    case Type::IQ1_S: return &iq1_s;
    case Type::IQ4_NL: return &iq4_nl;
    case Type::IQ3_S: return &iq3_s;
    case Type::IQ2_S: return &iq2_s;
    case Type::IQ4_XS: return &iq4_xs;
    case Type::I8: return &i8;
    case Type::I16: return &i16;
    case Type::I32: return &i32;
    case Type::I64: return &i64;
    case Type::F64: return &f64;
    case Type::IQ1_M: return &iq1_m;
    case Type::TQ1_0: return &tq1_0;
    case Type::TQ2_0: return &tq2_0;
  }
  return nullptr;
}

}  // namespace

const TypeInfo& type_info(Type t) {
  const TypeInfo* ti = lookup(t);
  return ti ? *ti : kUnknown;
}

bool type_from_name(std::string_view name, Type* out) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const TypeInfo* ti = lookup(static_cast<Type>(raw));
    if (!ti) continue;
    std::string n(ti->name);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == lower) {
      *out = static_cast<Type>(raw);
      return true;
    }
  }
  return false;
}

}  // namespace swz::ggml
