// Package oracle is the byte-at-a-time RFC 8785 canonicaliser that package
// jcs shipped before its streaming rewrite, kept unchanged as a reference
// for jcs's differential tests (FuzzAgainstOracle, TestAgainstOracleRandom).
// Only tests import it; it is not part of any binary.
package oracle
