"""Goodput's SQL files (migrations, partition writes, detector series, analyst views), shipped as
package data so that an installed wheel finds them where a checkout does: beside `orchestration/`."""
