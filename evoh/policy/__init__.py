"""Policies: whatever turns a harness prompt into a `<think>…</think><action>…</action>` response."""
