"""The console's stylesheet and its one small script (served by the console itself)."""

from __future__ import annotations

from typing import Final

TOKEN_HEADER: Final = "X-Console-Token"  # noqa: S105 (a header name, not a token)

# Posts every form marked data-action with the token in a header (a form from another
# page cannot add one: no CSRF), then follows the answer's location with its note.
SCRIPT: Final = """
"use strict";
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-action")) return;
  event.preventDefault();
  const token = new URLSearchParams(window.location.search).get("token") || "";
  for (const button of form.querySelectorAll("button")) button.disabled = true;
  const answer = await fetch(form.getAttribute("action"), {
    method: "POST",
    headers: {"X-Console-Token": token, "Content-Type": "application/x-www-form-urlencoded"},
    body: new URLSearchParams(new FormData(form)),
  });
  const result = await answer.json();
  const next = new URL(result.location || window.location.href, window.location.href);
  next.searchParams.set("token", token);
  next.searchParams.set("note", result.message || result.error || String(answer.status));
  window.location.assign(next.toString());
});
"""

STYLE: Final = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { background: #1d2330; color: #fff; padding: 8px 16px; }
header nav { display: inline; margin-left: 24px; }
header nav a { color: #cfd6e4; margin-right: 14px; text-decoration: none; }
header nav a:hover { color: #fff; }
main { padding: 8px 16px 24px; }
footer { color: #778; padding: 0 16px 16px; font-size: 12px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e3e6ec; }
th { background: #eef0f4; font-weight: 600; }
code { font-size: 12px; word-break: break-all; }
.counts { display: flex; gap: 12px; }
.count { background: #fff; padding: 8px 14px; border: 1px solid #e3e6ec; border-radius: 4px; }
.count b { display: block; font-size: 22px; }
.state { padding: 1px 6px; border-radius: 3px; font-size: 12px; background: #e3e6ec; }
.state-completed, .state-done { background: #d4f1dc; color: #14532d; }
.state-failed { background: #fbd5d5; color: #7f1d1d; }
.state-processing, .state-intent { background: #fde9c4; color: #7c4a03; }
.state-pending { background: #dbe7fb; color: #1e3a8a; }
.note { background: #fff8d6; border: 1px solid #efd97a; padding: 6px 10px; }
.error { color: #9b1c1c; }
.badge { background: #7c4a03; padding: 1px 6px; border-radius: 3px; margin-left: 8px; }
form.inline { display: inline; margin-right: 6px; }
form.filter label { margin-right: 10px; }
button { cursor: pointer; } button.primary { font-weight: 600; }
.actions { margin: 8px 0; }
table.waterfall td { padding: 2px 8px; font-size: 12px; white-space: nowrap; }
table.waterfall td.bar { width: 60%; }
table.waterfall svg { width: 100%; height: 12px; display: block; background: #f1f3f7; }
table.waterfall rect { fill: #3b6fd8; }
table.waterfall rect.span-error { fill: #c0392b; }
table.waterfall rect.span-unfinished { fill: #d9a21b; }
table.waterfall rect.span-wait { fill: #9aa7c2; }
"""
