"""The Canvas and Moodle exports read back the way each importer reads them (tests/lms_importers.py): every finished
grade reaches its student, a blank changes nothing, and a name a spreadsheet would run still matches its student."""
from lms_importers import read_canvas_import, read_moodle_import

from tinytorch.course.results.lms import Roster, Student, write_export

ROWS = [{'student': 'carol.smith@uni.edu', 'total': '9', 'raw_total': '9', 'late_penalty': '0', 'max_points': '10',
         'status': 'complete', 'timestamp': '2026-12-01 10:00:00.123456+00:00', 'seconds_late': '0'},
        {'student': 'alan', 'total': '7.2', 'raw_total': '8', 'late_penalty': '0.8', 'max_points': '10',
         'status': 'complete', 'timestamp': '2026-12-02 10:00:00+00:00', 'seconds_late': '36000'},
        {'student': 'zed', 'total': '5', 'raw_total': '5', 'late_penalty': '0', 'max_points': '10', 'status': 'complete',
         'timestamp': '', 'seconds_late': ''},
        {'student': 'dee', 'total': '4', 'raw_total': '4', 'late_penalty': '0', 'max_points': '10', 'status': 'to grade',
         'timestamp': '', 'seconds_late': ''}]
CANVAS_CLASS = Roster({s.id: s for s in [Student('carol.smith@uni.edu', 'Carol', 'Smith', '', '4401', 'S-17', 'CS101 A'),
                                         Student('alan', 'Alan', 'Ng', '', '4402', 'S-18', 'CS101 B'),
                                         Student('dee', 'Dee', 'Lu', 'dee@uni.edu', '4403')]}, 'canvas')
CANVAS_USERS = [{'id': '4401', 'sis_user_id': 'S-17', 'login_id': 'carol.smith@uni.edu'},
                {'id': '4402', 'sis_user_id': 'S-18', 'login_id': 'alan'}, {'id': '4403', 'sis_user_id': '', 'login_id': 'dee'}]
EVIL = Student('mallory', '=HYPERLINK("http://e.test","x")', '@SUM(1)', '-mallory@uni.edu', '4405', '+S-20', '-1+1')


def test_canvas_reads_every_finished_grade(tmp_path):
    out, notes = write_export('canvas', tmp_path, '11_embeddings', ROWS, CANVAS_CLASS, 'Embeddings (881)',
                              tmp_path / 'canvas.csv')
    seen = read_canvas_import(out, CANVAS_USERS)
    assert seen['points_possible'] == {'Embeddings (881)': 10.0}
    assert seen['grades'] == {'4401': {'Embeddings (881)': 9.0}, '4402': {'Embeddings (881)': 7.2}}   # dee: blank
    assert seen['unmatched'] == [] and notes == [
        'left blank (Canvas keeps what it has): dee (to grade)',
        'not on the roster, so not in the file (Canvas could not match them): zed']


def test_moodle_reads_every_finished_grade_by_email(tmp_path):
    roster = Roster({'alan': Student('alan', 'Alan', 'Ng', 'alan@uni.edu'),
                     'carol.smith@uni.edu': Student('carol.smith@uni.edu', 'Carol', 'Smith', 'carol.smith@uni.edu'),
                     'nomail': Student('nomail')}, 'roster')
    out, _ = write_export('moodle', tmp_path, '11_embeddings', ROWS, roster, None, tmp_path / 'moodle.csv')
    users = [{'email': 'alan@uni.edu', 'idnumber': ''}, {'email': 'carol.smith@uni.edu', 'idnumber': ''}]
    seen = read_moodle_import(out, users, 'Email address', '11_embeddings')
    assert seen == {'grades': {'alan@uni.edu': 7.2, 'carol.smith@uni.edu': 9.0}, 'errors': []}


def test_a_name_a_spreadsheet_would_run_still_matches_its_student(tmp_path):
    rows = ROWS + [{**ROWS[0], 'student': 'mallory', 'total': '-3.6'}]
    roster = Roster({**CANVAS_CLASS.students, 'mallory': EVIL}, 'canvas')
    canvas, _ = write_export('canvas', tmp_path, '11_embeddings', rows, roster, None, tmp_path / 'canvas.csv')
    users = CANVAS_USERS + [{'id': '4405', 'sis_user_id': '+S-20', 'login_id': 'mallory'}]
    assert read_canvas_import(canvas, users)['grades']['4405'] == {'11_embeddings': -3.6}
    moodle, _ = write_export('moodle', tmp_path, '11_embeddings', rows, roster, None, tmp_path / 'moodle.csv')
    seen = read_moodle_import(moodle, [{'email': '-mallory@uni.edu', 'idnumber': ''}], grade='11_embeddings')
    assert seen['grades'] == {}          # the quoted email no longer matches: the notes name it to enter by hand


HELD_ROW = {'student': 'dee', 'total': '0', 'raw_total': '0', 'late_penalty': '0', 'max_points': '10', 'status': 'held',
            'timestamp': '', 'seconds_late': '', 'details': "held at 0 until you clear it: it holds nbgrader's markers",
            'review': "held: held at 0 until you clear it: it holds nbgrader's markers"}
FLAGGED_ROW = {**ROWS[1], 'review': 'flagged: the re-check disagrees'}


def test_a_held_or_flagged_student_is_named_as_such_in_every_export(tmp_path):
    """A held copy is left out of Canvas and Moodle (a blank changes nothing) and named `held` with why; a student still
    ticked Flagged? in the formgrader is exported and named `flagged` with why, in the notes of every export."""
    rows = [ROWS[0], FLAGGED_ROW, HELD_ROW]
    roster = Roster({**CANVAS_CLASS.students, 'dee': Student('dee', 'Dee', 'Lu', 'dee@uni.edu', '4403')}, 'canvas')
    out, notes = write_export('canvas', tmp_path, '11_embeddings', rows, roster, None, tmp_path / 'canvas.csv')
    assert read_canvas_import(out, CANVAS_USERS)['grades'] == {'4401': {'11_embeddings': 9.0},
                                                               '4402': {'11_embeddings': 7.2}}
    review = ("still ticked Flagged? in the formgrader (untick it once you have looked): alan (flagged: the re-check "
              "disagrees); dee (held: held at 0 until you clear it: it holds nbgrader's markers)")
    assert notes == ['left blank (Canvas keeps what it has): dee (held)', review], notes
    _, notes = write_export('moodle', tmp_path, '11_embeddings', rows, roster, None, tmp_path / 'moodle.csv')
    assert 'left blank (Moodle skips a blank grade): dee (held)' in notes and review in notes, notes
    _, notes = write_export('nbgrader', tmp_path, '11_embeddings', rows, roster, None, tmp_path / 'nbgrader.csv')
    assert notes == [review], notes
