#!/usr/bin/env python3
"""Apache Superset, unmodified, over pg_dp as a DP-only analyst, driven through its REST API.

A Superset server (installed and started by tests/bi/tools.sh in a virtual environment, metadata in
SQLite, Superset's own caches off) registers the database with the analyst's login, and builds:
- a bar chart of dp_count and dp_sum by diagnosis (a declared public domain),
- a time-series chart with a time range and a monthly grain (DATE_TRUNC and TO_DATE, keys kept by
  partition selection),
- a table chart with server pagination (each page a LIMIT/OFFSET over the same DP query, and a
  row-count query wrapped around it),
- a dashboard of the three, refreshed twice,
- the bar chart's query in SQL Lab.
It checks the answers against the exact ones (ε = 1000) and the charges in dp.ledger: every chart's
first render is paid once, refreshes, pages and the same query in SQL Lab are free.

Run by scripts/test.sh with the virtual environment's Python:
    $VENV/bin/python tests/bi/test_superset.py --host /tmp --port 25433 --superset http://127.0.0.1:25488
Prints one line per check and "superset: N passed, M failed". It expects a Superset started afresh
(tools.sh superset_start), whose metadata holds nothing of an earlier run.
"""
import argparse
import datetime
import json
import os
import sys

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run_checks  # noqa: E402
from database import Database  # noqa: E402

ARGS = None
DB = "pg_dp_bi"
ANALYST = "bi_analyst"
EPS = 1000  # large: the answers must equal the exact ones up to rounding
STATE = {}


def db():
    return STATE["db_"]


def sql(query, args=None):
    return db().sql(query, args)


def spent():
    return db().spent()


def receipts():
    return db().receipts()


class Superset:
    def __init__(self, base):
        self.base = base.rstrip("/")
        self.s = requests.Session()
        r = self.s.post(f"{self.base}/api/v1/security/login",
                        json={"username": "admin", "password": "admin", "provider": "db", "refresh": True}, timeout=60)
        r.raise_for_status()
        self.s.headers["Authorization"] = "Bearer " + r.json()["access_token"]

    def call(self, method, path, body=None):
        r = self.s.request(method, f"{self.base}{path}", json=body, timeout=300)
        if r.status_code >= 400:
            raise AssertionError(f"{method} {path}: {r.status_code} {r.text[:2000]}")
        return r.json()


def metric(expr, label):
    return {"expressionType": "SQL", "sqlExpression": expr, "label": label}


COUNT = metric(f"dp_count(id, {EPS})", "visits")
COST = metric(f"dp_sum(cost, 0, 500, {EPS})", "cost")


def query_context(ds, queries, form_data=None):
    return {"datasource": {"id": ds, "type": "table"}, "force": False, "queries": queries,
            "form_data": form_data or {}, "result_format": "json", "result_type": "full"}


def bar_queries():
    return [{"columns": ["diagnosis"], "metrics": [COUNT, COST], "orderby": [[COUNT, False]], "row_limit": 10000,
             "filters": [], "extras": {"having": "", "where": ""}}]


def time_queries():
    axis = {"timeGrain": "P1M", "columnType": "BASE_AXIS", "sqlExpression": "visit_date", "label": "visit_date",
            "expressionType": "SQL"}
    return [{"columns": [axis], "metrics": [COUNT], "orderby": [[COUNT, False]], "row_limit": 10000,
             "filters": [{"col": "visit_date", "op": "TEMPORAL_RANGE", "val": "2023-01-01 : 2023-07-01"}],
             "extras": {"having": "", "where": "", "time_grain_sqla": "P1M"}}]


def page_queries(offset, size=2):
    base = {"columns": ["diagnosis"], "metrics": [COUNT], "orderby": [[COUNT, False]], "filters": [],
            "extras": {"having": "", "where": ""}}
    return [dict(base, row_limit=size, row_offset=offset),
            dict(base, row_limit=10000, is_rowcount=True)]


def rows_of(result, i=0):
    return result["result"][i]["data"]


def setup():
    STATE["db_"] = Database(ARGS.host, ARGS.port, DB, ANALYST)
    db().create(budget_delta=0.01)
    ss = Superset(ARGS.superset)
    uri = f"postgresql+psycopg2://{ANALYST}@127.0.0.1:{ARGS.port}/{DB}"
    registered = ss.call("POST", "/api/v1/database/", {"database_name": f"pg_dp analyst {os.getpid()}", "sqlalchemy_uri": uri,
                                                      "expose_in_sqllab": True, "allow_dml": False})
    ds = ss.call("POST", "/api/v1/dataset/", {"database": registered["id"], "schema": "public", "table_name": "visits"})
    STATE.update(ss=ss, db=registered["id"], ds=ds["id"])


def close(a, b, tol):
    return abs(float(a) - float(b)) <= tol


def new_chart(name, viz, queries, form_data):
    ss, ds = STATE["ss"], STATE["ds"]
    qc = query_context(ds, queries, form_data)
    chart = ss.call("POST", "/api/v1/chart/", {"slice_name": name, "viz_type": viz, "datasource_id": ds,
                                               "datasource_type": "table", "params": json.dumps(form_data),
                                               "query_context": json.dumps(qc)})
    return chart["id"]


def render(chart_id, force=True):
    return STATE["ss"].call("GET", f"/api/v1/chart/{chart_id}/data/?force={'true' if force else 'false'}")


def check_1_the_dataset_registers_as_the_analyst_for_free():
    ss = STATE["ss"]
    ds = ss.call("GET", f"/api/v1/dataset/{STATE['ds']}")["result"]
    names = {c["column_name"]: c for c in ds["columns"]}
    assert set(names) == {"id", "visit_date", "diagnosis", "cost"}, names
    assert names["visit_date"]["is_dttm"], names["visit_date"]
    assert receipts() == 0, "reading the table's columns was charged"


def check_2_a_bar_chart_is_paid_once_and_exact_at_a_large_epsilon():
    before = spent()
    form = {"viz_type": "echarts_timeseries_bar", "x_axis": "diagnosis", "metrics": [COUNT, COST]}
    cid = new_chart("visits by diagnosis", "echarts_timeseries_bar", bar_queries(), form)
    STATE["bar"] = cid
    data = rows_of(render(cid))
    assert spent() - before == 2 * EPS, (spent(), before)
    truth = {d: (n, s) for d, n, s in sql("SELECT diagnosis, count(*), sum(cost) FROM visits GROUP BY 1")}
    assert {r["diagnosis"] for r in data} == set(truth), data
    for r in data:
        n, s = truth[r["diagnosis"]]
        assert close(r["visits"], n, 0.5) and close(r["cost"], s, 5), (r, n, s)
    again = rows_of(render(cid))
    assert again == data and spent() - before == 2 * EPS, "a refresh was charged or released afresh"


def check_3_a_time_series_with_a_range_and_a_monthly_grain():
    before = spent()
    form = {"viz_type": "echarts_timeseries_line", "x_axis": "visit_date", "time_grain_sqla": "P1M",
            "metrics": [COUNT], "time_range": "2023-01-01 : 2023-07-01"}
    cid = new_chart("visits per month", "echarts_timeseries_line", time_queries(), form)
    STATE["time"] = cid
    result = render(cid)
    text = result["result"][0]["query"]
    assert "DATE_TRUNC" in text.upper() and "2023-07-01" in text, text
    data = rows_of(result)
    truth = dict(sql("SELECT date_trunc('month', visit_date)::date, count(*) FROM visits "
                       "WHERE visit_date >= '2023-01-01' AND visit_date < '2023-07-01' GROUP BY 1"))
    got = {}
    for r in data:
        ts = r["visit_date"]
        # Superset returns epoch milliseconds for temporal columns
        day = datetime.datetime.fromtimestamp(ts / 1000, datetime.timezone.utc).date() if isinstance(ts, (int, float)) else ts
        got[day] = r["visits"]
    assert set(got) == set(truth), (got, truth)
    for d, n in truth.items():
        assert close(got[d], n, 0.5), (d, got[d], n)
    charged = spent() - before
    assert charged > EPS, charged  # the count and the selection of the months
    render(cid)
    assert spent() - before == charged, "a refresh of the time series was charged"


def check_4_a_table_with_server_pagination_pays_for_the_first_page_only():
    ss, ds = STATE["ss"], STATE["ds"]
    before = spent()
    form = {"viz_type": "table", "groupby": ["diagnosis"], "metrics": [COUNT], "server_pagination": True,
            "server_page_length": 2}
    cid = new_chart("visits table", "table", page_queries(0), form)
    STATE["table"] = cid
    first = render(cid)
    assert spent() - before == EPS, "the first page was not paid once"
    page1 = rows_of(first, 0)
    total = rows_of(first, 1)[0]["rowcount"]
    assert len(page1) == 2 and total == 4, (page1, total)
    second = ss.call("POST", "/api/v1/chart/data", query_context(ds, page_queries(2), form))
    page2 = rows_of(second, 0)
    assert spent() - before == EPS, "the second page was charged"
    assert len(page2) == 2 and not {r["diagnosis"] for r in page1} & {r["diagnosis"] for r in page2}, (page1, page2)
    # the pages are one release, in one order
    counts = [r["visits"] for r in page1 + page2]
    assert counts == sorted(counts, reverse=True), counts


def check_5_a_dashboard_refreshed_twice_costs_nothing():
    ss = STATE["ss"]
    charts = [STATE["bar"], STATE["time"], STATE["table"]]
    dash = ss.call("POST", "/api/v1/dashboard/", {"dashboard_title": "pg_dp visits", "published": True})
    for cid in charts:
        ss.call("PUT", f"/api/v1/chart/{cid}", {"dashboards": [dash["id"]]})
    listed = {c["id"] for c in ss.call("GET", f"/api/v1/dashboard/{dash['id']}/charts")["result"]}
    assert listed == set(charts), listed
    before, n = spent(), receipts()
    first = [rows_of(render(c)) for c in charts]
    for _ in range(2):
        assert [rows_of(render(c)) for c in charts] == first
    assert spent() == before and receipts() == n, "a dashboard refresh was charged"


def check_6_the_same_query_in_sql_lab_is_the_charts_release():
    ss = STATE["ss"]
    before = spent()
    chart = rows_of(render(STATE["bar"]))
    q = f"SELECT diagnosis, dp_count(id, {EPS}) AS visits, dp_sum(cost, 0, 500, {EPS}) AS cost FROM visits GROUP BY diagnosis"
    res = ss.call("POST", "/api/v1/sqllab/execute/", {"database_id": STATE["db"], "sql": q, "runAsync": False,
                                                     "schema": "public", "client_id": "pgdp01"})
    lab = {r["diagnosis"]: (r["visits"], r["cost"]) for r in res["data"]}
    assert lab == {r["diagnosis"]: (r["visits"], r["cost"]) for r in chart}, (lab, chart)
    assert spent() == before, "SQL Lab paid again for the chart's release"


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="/tmp")
    ap.add_argument("--port", type=int, default=25433)
    ap.add_argument("--superset", default="http://127.0.0.1:25488")
    ARGS = ap.parse_args()
    setup()
    run_checks(globals(), "superset")


if __name__ == "__main__":
    main()
