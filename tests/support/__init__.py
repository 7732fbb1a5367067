"""Helpers the tests share: emulators, models, fakes, builders and the real-cluster harness (realkube)."""
