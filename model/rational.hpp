// Exact rationals for the models: GMP through Boost.Multiprecision.
#pragma once

#include <boost/multiprecision/gmp.hpp>

namespace aether::model {

using Rational = boost::multiprecision::mpq_rational;
using Integer = boost::multiprecision::mpz_int;

// Every finite double is a dyadic rational; this is its exact value.
inline Rational exact(double x) { return Rational(x); }

}  // namespace aether::model
