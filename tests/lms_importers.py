"""What Canvas' and Moodle's grade importers make of a file, read by their documented rules: the oracles that the
course's exports are checked against (tests/test_lms_exports.py and the end-to-end tests). Not part of the course
package: an instructor's install never runs them."""
from pathlib import Path

from tinytorch.course.basics.errors import BadInput
from tinytorch.course.basics.vocabulary import read_csv_lines

_CANVAS_NOT_ASSIGNMENTS = {'Student', 'ID', 'SIS User ID', 'SIS Login ID', 'Integration ID', 'Section', 'Root Account',
                           'Current Points', 'Final Points', 'Current Score', 'Final Score', 'Current Grade', 'Final Grade'}


def _lines(path, what: str) -> list:
    return [fields for _, fields in read_csv_lines(path, f"{what} {path}", 'UTF-8 CSV')]


def _canvas_match(cells: list, index: dict, canvas_students: list):
    "The Canvas student a row names: by `ID`, then `SIS User ID`, then `SIS Login ID` (None: no one)."
    match = None
    for column, key in [('ID', 'id'), ('SIS User ID', 'sis_user_id'), ('SIS Login ID', 'login_id')]:
        value = cells[index[column]].strip() if column in index and index[column] < len(cells) else ''
        match = match or next((s for s in canvas_students if value and str(s.get(key, '')) == value), None)
    return match


def read_canvas_import(path, canvas_students: list) -> dict:
    """What Canvas' importer makes of `path`, given the course's students (dicts with id, sis_user_id, login_id):
    {'points_possible': {column: points}, 'grades': {canvas id: {column: float | 'EX'}}, 'unmatched': [row cells]}."""
    lines = _lines(Path(path), 'Canvas import')
    header = lines[0] if lines else []
    if not (len(header) >= 2 and 'Student' in header[0] and 'ID' in header[1]):
        raise BadInput(f"{path}: Canvas can't find the header row (first cell 'Student', second 'ID'): {header[:2]}")
    index = {h.strip(): i for i, h in enumerate(header)}
    assignments = [(i, h.strip()) for i, h in enumerate(header) if h.strip() not in _CANVAS_NOT_ASSIGNMENTS
                   and '(read only)' not in h]
    body, points = lines[1:], {}
    if body and 'Points Possible' in body[0][0]:
        points = {h: float(body[0][i]) for i, h in assignments if body[0][i].strip()}
        body = body[1:]
    grades, unmatched = {}, []
    for cells in body:
        match = _canvas_match(cells, index, canvas_students)
        if match is None:
            unmatched.append(cells)
            continue
        for i, title in assignments:
            value = cells[i].strip() if i < len(cells) else ''
            if value in ('', '-'):
                continue
            if value != 'EX':
                try:
                    value = float(value)
                except ValueError:
                    raise BadInput(f"{path}: {title!r} of {cells[0]!r} is {value!r}, not a score Canvas reads") from None
            grades.setdefault(match['id'], {})[title] = value
    return {'points_possible': points, 'grades': grades, 'unmatched': unmatched}


def read_moodle_import(path, users: list, map_from: str = 'Email address', grade: str = '') -> dict:
    """What Moodle's CSV grade import makes of `path` with `map_from` mapped to the user's email (users: dicts with
    email, idnumber) and column `grade` to the grade item: {'grades': {email: float}, 'errors': [...]}."""
    lines = _lines(Path(path), 'Moodle import')
    header = [h.strip() for h in (lines[0] if lines else [])]    # Moodle trims the headers
    if map_from not in header or grade not in header:
        raise BadInput(f"{path}: no column {map_from!r} or {grade!r} to map in {header}")
    user_at, grade_at, out, errors = header.index(map_from), header.index(grade), {}, []
    field_name = 'email' if 'mail' in map_from.lower() else 'idnumber'
    for number, cells in enumerate(lines[1:], start=2):
        key, value = cells[user_at].strip(), cells[grade_at].strip()
        user = next((u for u in users if u.get(field_name, '').lower() == key.lower() and key), None)
        if user is None:
            errors.append(f"line {number}: no user with {field_name} {key!r}")
            continue
        if value == '':
            continue
        try:
            out[user['email']] = float(value)
        except ValueError:
            errors.append(f"line {number}: grade {value!r} is not a number")
    return {'grades': out, 'errors': errors}
