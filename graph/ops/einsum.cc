#include "graph/ops/einsum.h"

#include <algorithm>
#include <map>

#include "graph/ops/infer.h"

namespace gp::graph::ops {
namespace {

constexpr int kLetters = 52;  // raw labels: 'A'..'Z' are 0..25, 'a'..'z' 26..51, ellipsis dims 52+

struct Term {
  std::vector<int> letters_before, letters_after;  // raw letter labels around the ellipsis
  bool ellipsis = false;
};

Result<Term> parse_term(std::string const& s, std::string const& equation) {
  Term t;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char const ch = s[i];
    if (ch == '.') {
      if (s.compare(i, 3, "...") != 0 || t.ellipsis)
        return invalid_argument("Einsum equation '" + equation + "': a '.' that is not one '...' per operand");
      t.ellipsis = true;
      i += 2;
    } else if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z')) {
      int const raw = ch <= 'Z' ? ch - 'A' : 26 + ch - 'a';
      (t.ellipsis ? t.letters_after : t.letters_before).push_back(raw);
    } else {
      return invalid_argument("Einsum equation '" + equation + "': unexpected character '" + std::string(1, ch) +
                              "' (labels are letters, '...', ',' and '->')");
    }
  }
  return t;
}

// A term's raw labels for `ell` ellipsis dims, with `max_ell` ellipsis dims in all.
std::vector<int> expand(Term const& t, int64_t ell, int64_t max_ell) {
  std::vector<int> v = t.letters_before;
  for (int64_t j = 0; j < ell; ++j) v.push_back(kLetters + static_cast<int>(max_ell - ell + j));
  v.insert(v.end(), t.letters_after.begin(), t.letters_after.end());
  return v;
}

}  // namespace

Result<EinsumSpec> parse_einsum(std::string const& equation, std::vector<int64_t> const& ranks) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  std::size_t const arrow = eq.find("->");
  bool const explicit_out = arrow != std::string::npos;
  std::string const lhs = explicit_out ? eq.substr(0, arrow) : eq;
  std::vector<Term> terms;
  std::size_t start = 0;
  while (true) {
    std::size_t const comma = lhs.find(',', start);
    ASSIGN_OR_RETURN(Term t, parse_term(lhs.substr(start, comma - start), equation));
    terms.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    return invalid_argument("Einsum equation '" + equation + "' names " + std::to_string(terms.size()) +
                            " operand(s), the node has " + std::to_string(ranks.size()));
  std::vector<int64_t> ell(terms.size(), 0);
  int64_t max_ell = 0;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    int64_t const letters = static_cast<int64_t>(terms[k].letters_before.size() + terms[k].letters_after.size());
    if (terms[k].ellipsis ? letters > ranks[k] : letters != ranks[k])
      return invalid_argument("Einsum equation '" + equation + "': operand " + std::to_string(k) + " has rank " +
                              std::to_string(ranks[k]) + ", its term has " + std::to_string(letters) + " label(s)");
    ell[k] = ranks[k] - letters;
    max_ell = std::max(max_ell, ell[k]);
  }
  std::vector<std::vector<int>> raw_in;
  std::map<int, int> count;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    raw_in.push_back(expand(terms[k], ell[k], max_ell));
    for (int l : raw_in.back()) ++count[l];
  }
  std::vector<int> raw_out;
  if (explicit_out) {
    ASSIGN_OR_RETURN(Term t, parse_term(eq.substr(arrow + 2), equation));
    raw_out = expand(t, t.ellipsis ? max_ell : 0, max_ell);
    for (std::size_t i = 0; i < raw_out.size(); ++i) {
      if (!count.count(raw_out[i]))
        return invalid_argument("Einsum equation '" + equation + "': an output label is in no operand");
      if (std::find(raw_out.begin(), raw_out.begin() + static_cast<std::ptrdiff_t>(i), raw_out[i]) !=
          raw_out.begin() + static_cast<std::ptrdiff_t>(i))
        return invalid_argument("Einsum equation '" + equation + "': an output label is repeated");
    }
  } else {
    for (int64_t j = 0; j < max_ell; ++j) raw_out.push_back(kLetters + static_cast<int>(j));
    for (auto const& [l, n] : count)  // std::map: alphabetical order
      if (l < kLetters && n == 1) raw_out.push_back(l);
  }
  EinsumSpec spec;
  std::map<int, int> id;
  for (auto const& v : raw_in) {
    std::vector<int> labels;
    for (int l : v) {
      labels.push_back(id.emplace(l, static_cast<int>(id.size())).first->second);
    }
    spec.inputs.push_back(std::move(labels));
  }
  for (int l : raw_out) spec.output.push_back(id.at(l));
  spec.num_labels = static_cast<int>(id.size());
  return spec;
}

Result<std::vector<int64_t>> einsum_label_sizes(EinsumSpec const& spec,
                                                std::vector<std::vector<int64_t>> const& operand_dims) {
  std::vector<int64_t> size(static_cast<std::size_t>(spec.num_labels), 0);
  std::vector<bool> seen(size.size(), false);
  for (std::size_t k = 0; k < spec.inputs.size(); ++k) {
    for (std::size_t i = 0; i < spec.inputs[k].size(); ++i) {
      std::size_t const l = static_cast<std::size_t>(spec.inputs[k][i]);
      int64_t const d = operand_dims.at(k).at(i);
      if (seen[l] && size[l] != d)
        return invalid_argument("Einsum: a label has size " + dim_str(size[l]) + " in one place and " + dim_str(d) +
                                " in another (broadcasting size-1 dims is not supported)");
      seen[l] = true;
      size[l] = d;
    }
  }
  return size;
}

}  // namespace gp::graph::ops
