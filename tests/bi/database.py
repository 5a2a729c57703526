"""The database side of the BI tool tests: a fresh database with a protected visits table and a
DP-only analyst role, and superuser statements (exact answers, the analyst's spending)."""
import psycopg2

DIAGNOSES = "ARRAY['flu','cold','injury','checkup']"


class Database:
    def __init__(self, host, port, name, analyst):
        self.host, self.port, self.name, self.analyst = host, port, name, analyst

    def sql(self, query, args=None, db=None):
        c = psycopg2.connect(host=self.host, port=self.port, dbname=db or self.name, user="postgres")
        c.autocommit = True
        try:
            with c.cursor() as cur:
                cur.execute(query, args)
                return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def create(self, budget_delta):
        """visits(id, visit_date, diagnosis, cost): 3,000 rows over 2023, protected, with the four
        diagnoses a declared domain; the analyst may read it only through DP queries."""
        for stmt in (f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)", f"CREATE DATABASE {self.name}",
                     f"DROP ROLE IF EXISTS {self.analyst}", f"CREATE ROLE {self.analyst} LOGIN"):
            self.sql(stmt, db="postgres")
        for stmt in (
            "CREATE EXTENSION pg_dp",
            "CREATE TABLE visits (id int PRIMARY KEY, visit_date date NOT NULL, diagnosis text NOT NULL, cost float8)",
            "INSERT INTO visits SELECT g, date '2023-01-01' + (g * 7 % 365), "
            f"({DIAGNOSES})[1 + g % 4], (g % 500)::float8 FROM generate_series(1, 3000) g",
            "SELECT dp.protect_table('visits')",
            f"SELECT dp.set_domain('visits', 'diagnosis', {DIAGNOSES})",
            f"GRANT SELECT ON visits TO {self.analyst}",
            f"SELECT dp.set_budget('{self.analyst}', 1000000, {budget_delta})",
        ):
            self.sql(stmt)

    def spent(self):
        return self.sql("SELECT epsilon_spent FROM dp.budgets WHERE role = %s::regrole", (self.analyst,))[0][0]

    def receipts(self):
        return self.sql("SELECT count(*) FROM dp.ledger WHERE role = %s::regrole", (self.analyst,))[0][0]
