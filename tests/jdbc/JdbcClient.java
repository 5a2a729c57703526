// pg_dp through JDBC (Debian's libpostgresql-jdbc-java), as BI tools and Java applications use it.
// Run by scripts/test.sh:  java -cp /usr/share/java/postgresql.jar:DIR JdbcClient PORT
// Each check prints one line; the last line is "jdbc: N passed, M failed"; exits non-zero on a failure.
import java.math.BigDecimal;
import java.sql.*;
import java.util.ArrayList;
import java.util.List;

public class JdbcClient {
    static String url;
    static int passed = 0, failed = 0;

    interface Check { void run() throws Exception; }

    static void check(String name, Check c) {
        try {
            c.run();
            System.out.println("jdbc " + name + " ... ok");
            passed++;
        } catch (Throwable t) {
            System.out.println("jdbc " + name + " ... FAILED: " + t);
            failed++;
        }
    }

    static Connection connect(String user) throws SQLException {
        return DriverManager.getConnection(url + "?user=" + user);
    }

    static void require(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static BigDecimal spent(String role) throws SQLException {
        try (Connection c = connect("postgres");
             PreparedStatement ps = c.prepareStatement("SELECT epsilon_spent FROM dp.budgets WHERE role = ?::regrole")) {
            ps.setString(1, role);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getBigDecimal(1);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        url = "jdbc:postgresql://localhost:" + args[0] + "/pg_dp_jdbc";
        try (Connection c = DriverManager.getConnection("jdbc:postgresql://localhost:" + args[0] + "/postgres?user=postgres");
             Statement s = c.createStatement()) {
            s.execute("DROP DATABASE IF EXISTS pg_dp_jdbc WITH (FORCE)");
            s.execute("CREATE DATABASE pg_dp_jdbc");
            // these checks count the charges of repeated executions: no release cache
            s.execute("ALTER DATABASE pg_dp_jdbc SET dp.release_cache = off");
        }
        try (Connection c = connect("postgres"); Statement s = c.createStatement()) {
            s.execute("CREATE EXTENSION pg_dp");
            s.execute("CREATE TABLE t AS SELECT g AS i, g::float8 AS x, g % 5 AS k FROM generate_series(1, 1000) g");
            s.execute("SELECT dp.protect_table('t')");
            s.execute("CREATE INDEX ON t (k)");
            s.execute("CREATE TABLE pub (id int PRIMARY KEY, v text)");
            s.execute("GRANT SELECT ON pub TO PUBLIC");
            s.execute("SELECT dp.set_domain('t', 'k', ARRAY[0, 1, 2, 3, 4])");
            s.execute("DROP ROLE IF EXISTS dp_jdbc_analyst");
            s.execute("CREATE ROLE dp_jdbc_analyst LOGIN");
            s.execute("SELECT dp.grant_budget('dp_jdbc_analyst', 1)");
            s.execute("DROP ROLE IF EXISTS dp_jdbc_bi");
            s.execute("CREATE ROLE dp_jdbc_bi LOGIN");
            s.execute("SELECT dp.grant_budget('dp_jdbc_bi', 100)");
        }

        check("prepared_statement_with_epsilon_as_a_parameter_is_charged_exactly", () -> {
            try (Connection c = connect("dp_jdbc_analyst");
                 PreparedStatement ps = c.prepareStatement("SELECT dp_count(x, ?) FROM t")) {
                // the driver switches to a named server-side statement after a few executions
                for (int n = 0; n < 6; n++) {
                    ps.setDouble(1, 0.05);
                    try (ResultSet rs = ps.executeQuery()) {
                        require(rs.next(), "a row");
                        long v = rs.getLong(1);
                        require(Math.abs(v - 1000) < 1000, "a noisy count near 1000: " + v);
                    }
                }
            }
            BigDecimal s = spent("dp_jdbc_analyst");
            require(s.compareTo(new BigDecimal("0.3")) == 0, "spent 6 × 0.05 = 0.3, got " + s);
        });

        check("fetch_size_with_autocommit_off_reads_every_group_once_and_is_charged_once", () -> {
            BigDecimal before = spent("dp_jdbc_analyst");
            try (Connection c = connect("dp_jdbc_analyst")) {
                c.setAutoCommit(false);
                try (PreparedStatement ps = c.prepareStatement("SELECT k, dp_count(i, 0.1) FROM t GROUP BY k ORDER BY k")) {
                    ps.setFetchSize(2); // a portal fetched two rows at a time
                    List<Integer> keys = new ArrayList<>();
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) keys.add(rs.getInt(1));
                    }
                    require(keys.size() == 5, "five groups, got " + keys);
                }
                c.commit();
            }
            BigDecimal s = spent("dp_jdbc_analyst").subtract(before);
            require(s.compareTo(new BigDecimal("0.1")) == 0, "one release of 0.1, got " + s);
        });

        check("budget_exhaustion_is_an_ordinary_query_error_with_sqlstate_53000", () -> {
            try (Connection c = connect("dp_jdbc_analyst"); Statement s = c.createStatement()) {
                try {
                    s.executeQuery("SELECT dp_sum(x, 0, 1000, 5) FROM t");
                    throw new AssertionError("not refused");
                } catch (SQLException e) {
                    require("53000".equals(e.getSQLState()), "SQLSTATE 53000, got " + e.getSQLState() + ": " + e.getMessage());
                    require(e.getMessage().contains("nothing was charged"), e.getMessage());
                }
                // the connection is still usable: pools keep it
                try (ResultSet rs = s.executeQuery("SELECT 1")) {
                    require(rs.next(), "the connection works after the refusal");
                }
            }
        });

        check("a_raw_read_is_refused_with_sqlstate_42501", () -> {
            try (Connection c = connect("dp_jdbc_analyst"); Statement s = c.createStatement()) {
                try {
                    s.executeQuery("SELECT x FROM t");
                    throw new AssertionError("not refused");
                } catch (SQLException e) {
                    require("42501".equals(e.getSQLState()), "SQLSTATE 42501, got " + e.getSQLState());
                }
            }
        });

        check("sparks_schema_probe_is_free_and_has_the_column_types", () -> {
            // Spark's JDBC source learns the columns of a query this way before it reads it
            String q = "SELECT k, dp_count(i, 0.5) AS n, dp_avg(x, 0, 1000, 0.5) AS a FROM t GROUP BY k";
            BigDecimal before = spent("dp_jdbc_bi");
            try (Connection c = connect("dp_jdbc_bi");
                 PreparedStatement ps = c.prepareStatement("SELECT * FROM (" + q + ") SPARK_GEN_SUBQ_0 WHERE 1=0");
                 ResultSet rs = ps.executeQuery()) {
                ResultSetMetaData md = rs.getMetaData();
                require(md.getColumnCount() == 3, "three columns, got " + md.getColumnCount());
                require(md.getColumnTypeName(1).equals("int4") && md.getColumnTypeName(2).equals("int8")
                        && md.getColumnTypeName(3).equals("float8"),
                        "int4, int8, float8, got " + md.getColumnTypeName(1) + ", " + md.getColumnTypeName(2) + ", " + md.getColumnTypeName(3));
                require(!rs.next(), "no row");
            }
            BigDecimal s = spent("dp_jdbc_bi");
            require(s.compareTo(before) == 0, "the probe was charged: " + before + " -> " + s);
        });

        check("metadata_calls_and_describe_charge_nothing", () -> {
            BigDecimal before = spent("dp_jdbc_bi");
            try (Connection c = connect("dp_jdbc_bi")) {
                DatabaseMetaData md = c.getMetaData();
                try (ResultSet rs = md.getTables(null, "public", "t", new String[] {"TABLE"})) {
                    require(rs.next(), "getTables lists t");
                }
                List<String> cols = new ArrayList<>();
                try (ResultSet rs = md.getColumns(null, "public", "t", null)) {
                    while (rs.next()) cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
                }
                require(cols.equals(List.of("i:int4", "x:float8", "k:int4")), "getColumns: " + cols);
                try (ResultSet rs = md.getPrimaryKeys(null, "public", "t")) {
                    require(!rs.next(), "t has no primary key");
                }
                // index listings read pg_class's page counts: real for a public table, NULL for
                // the protected one's index
                try (ResultSet rs = md.getIndexInfo(null, "public", "pub", false, true)) {
                    require(rs.next() && rs.getString("INDEX_NAME").equals("pub_pkey"), "getIndexInfo lists pub_pkey");
                }
                try (ResultSet rs = md.getIndexInfo(null, "public", "t", false, true)) {
                    require(rs.next(), "getIndexInfo lists the index of t");
                }
                // a prepared statement's columns, described before it runs
                try (PreparedStatement ps = c.prepareStatement("SELECT k, dp_sum(x, 0, 1000, 0.5) AS s FROM t GROUP BY k")) {
                    ResultSetMetaData rmd = ps.getMetaData();
                    require(rmd.getColumnCount() == 2 && rmd.getColumnTypeName(2).equals("float8"), "described: " + rmd.getColumnCount());
                }
            }
            BigDecimal s = spent("dp_jdbc_bi");
            require(s.compareTo(before) == 0, "metadata was charged: " + before + " -> " + s);
        });

        check("a_prepared_statement_past_its_threshold_follows_the_privacy_level", () -> {
            // after five executions the driver runs a named server-side statement (prepareThreshold)
            try (Connection c = connect("dp_jdbc_bi"); Statement s = c.createStatement();
                 PreparedStatement ps = c.prepareStatement("SELECT dp_count(i) FROM t WHERE k >= 0")) {
                for (int n = 0; n < 7; n++) {
                    try (ResultSet rs = ps.executeQuery()) { rs.next(); }
                }
                s.execute("SET dp.privacy_level = 'very_high'");
                try (ResultSet rs = ps.executeQuery()) { rs.next(); }
            }
            try (Connection c = connect("postgres"); Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT epsilon FROM dp.ledger WHERE role = 'dp_jdbc_bi'::regrole "
                         + "AND query_text LIKE '%k >= 0%' ORDER BY id DESC LIMIT 2")) {
                rs.next();
                BigDecimal last = rs.getBigDecimal(1);
                rs.next();
                BigDecimal before = rs.getBigDecimal(1);
                require(before.compareTo(BigDecimal.ONE) == 0 && last.compareTo(new BigDecimal("0.1")) == 0,
                        "1 at medium, then 0.1 at very_high; got " + before + ", " + last);
            }
        });

        try (Connection c = DriverManager.getConnection("jdbc:postgresql://localhost:" + args[0] + "/postgres?user=postgres");
             Statement s = c.createStatement()) {
            s.execute("DROP DATABASE IF EXISTS pg_dp_jdbc WITH (FORCE)");
        }
        System.out.println("jdbc: " + passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
