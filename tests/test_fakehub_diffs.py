"""How the stand-in reads diffs for review comments: positions, hunks and lines that move."""

from __future__ import annotations

from bot.fakehub.diffs import parse

TWO_HUNKS = """diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,4 +1,4 @@
 one
-two
+TWO
 three
 four
@@ -10,3 +10,4 @@ def tail():
 ten
+ten and a half
 eleven
 twelve
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/image.png b/image.png
Binary files a/image.png and b/image.png differ
"""


def test_positions_count_from_the_first_hunk_header_through_later_ones() -> None:
    files = parse(TWO_HUNKS)
    assert set(files) == {"app.py", "gone.txt"}  # a binary file has no lines to comment on
    app = files["app.py"]
    assert app.locate(2) == (3, "@@ -1,4 +1,4 @@\n one\n-two\n+TWO")
    assert app.locate(1) == (1, "@@ -1,4 +1,4 @@\n one")
    assert app.locate(11) == (8, "@@ -10,3 +10,4 @@ def tail():\n ten\n+ten and a half")
    twelve = app.locate(13)
    assert twelve is not None
    assert twelve[0] == 10
    assert app.locate(7) is None  # between the hunks: not in the diff
    assert files["gone.txt"].locate(1) is None  # only the old side


def test_a_line_moves_with_lines_added_above_it_and_is_lost_when_changed() -> None:
    moves = parse(
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
        "@@ -2 +2 @@\n-two\n+TWO\n"
        "@@ -5,0 +6,2 @@\n+new\n+newer\n"
        "@@ -9,2 +10,0 @@\n-nine\n-ten\n"
    )["app.py"]
    assert [moves.moved(line) for line in (1, 2, 3, 5, 6, 8, 9, 10, 11)] == [
        1,
        None,
        3,
        5,
        8,
        10,
        None,
        None,
        11,
    ]
