package kbatch.spark.columns;

import java.util.Arrays;

import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

import kbatch.kafka.wire.RecordColumns;

/**
 * Spark column vectors over {@link RecordColumns}' arrays (no copy). kbatch's own subclasses of
 * the public ColumnVector, so the reader does not depend on Spark's internal vectorized package.
 */
public final class KafkaVectors {
    private KafkaVectors() {}

    /** The methods a column of a given type does not have. */
    abstract static class Base extends ColumnVector {
        Base(DataType type) {
            super(type);
        }

        @Override
        public void close() {}

        private UnsupportedOperationException no(String what) {
            return new UnsupportedOperationException(what + " on a " + dataType().simpleString() + " column");
        }

        @Override
        public boolean hasNull() {
            return numNulls() > 0;
        }

        @Override
        public int numNulls() {
            return 0;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return false;
        }

        @Override
        public boolean getBoolean(int rowId) {
            throw no("getBoolean");
        }

        @Override
        public byte getByte(int rowId) {
            throw no("getByte");
        }

        @Override
        public short getShort(int rowId) {
            throw no("getShort");
        }

        @Override
        public int getInt(int rowId) {
            throw no("getInt");
        }

        @Override
        public long getLong(int rowId) {
            throw no("getLong");
        }

        @Override
        public float getFloat(int rowId) {
            throw no("getFloat");
        }

        @Override
        public double getDouble(int rowId) {
            throw no("getDouble");
        }

        @Override
        public ColumnarArray getArray(int rowId) {
            throw no("getArray");
        }

        @Override
        public ColumnarMap getMap(int ordinal) {
            throw no("getMap");
        }

        @Override
        public Decimal getDecimal(int rowId, int precision, int scale) {
            throw no("getDecimal");
        }

        @Override
        public UTF8String getUTF8String(int rowId) {
            throw no("getUTF8String");
        }

        @Override
        public byte[] getBinary(int rowId) {
            throw no("getBinary");
        }

        @Override
        public ColumnVector getChild(int ordinal) {
            throw no("getChild");
        }
    }

    static int count(boolean[] nulls, int n) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (nulls[i]) {
                k++;
            }
        }
        return k;
    }

    public static final class Longs extends Base {
        private final long[] v;
        private final boolean[] nulls;
        private final int nullCount;

        /** Long or timestamp (microseconds) values; nulls may be null (no nulls). */
        public Longs(DataType type, long[] v, boolean[] nulls, int n) {
            super(type);
            this.v = v;
            this.nulls = nulls;
            this.nullCount = nulls == null ? 0 : count(nulls, n);
        }

        @Override
        public int numNulls() {
            return nullCount;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return nullCount > 0 && nulls[rowId];
        }

        @Override
        public long getLong(int rowId) {
            return v[rowId];
        }

        @Override
        public long[] getLongs(int rowId, int count) {
            return Arrays.copyOfRange(v, rowId, rowId + count);
        }
    }

    public static final class Ints extends Base {
        private final int[] v;

        public Ints(int[] v) {
            super(DataTypes.IntegerType);
            this.v = v;
        }

        @Override
        public int getInt(int rowId) {
            return v[rowId];
        }
    }

    public static final class Shorts extends Base {
        private final short[] v;

        public Shorts(short[] v) {
            super(DataTypes.ShortType);
            this.v = v;
        }

        @Override
        public short getShort(int rowId) {
            return v[rowId];
        }
    }

    public static final class Booleans extends Base {
        private final boolean[] v;

        public Booleans(boolean[] v) {
            super(DataTypes.BooleanType);
            this.v = v;
        }

        @Override
        public boolean getBoolean(int rowId) {
            return v[rowId];
        }
    }

    /** Binary or string values (references into the input, or copies). */
    public static final class Binaries extends Base {
        private final RecordColumns.Binary b;

        public Binaries(DataType type, RecordColumns.Binary b) {
            super(type);
            this.b = b;
        }

        @Override
        public int numNulls() {
            return b.nullCount;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return b.nullCount > 0 && b.nulls[rowId];
        }

        @Override
        public byte[] getBinary(int rowId) {
            return b.get(rowId);
        }

        @Override
        public UTF8String getUTF8String(int rowId) {
            if (isNullAt(rowId)) {
                return null;
            }
            if (b.source[rowId] == 0) { // a copy: a view of it, no second copy
                return UTF8String.fromBytes(b.data, b.starts[rowId], b.lengths[rowId]);
            }
            return UTF8String.fromBytes(b.get(rowId));
        }
    }

    /** The same value on every row (topic, partition: one partition per input partition). */
    public static final class Constant extends Base {
        private final UTF8String string;
        private final int integer;

        public Constant(String s) {
            super(DataTypes.StringType);
            string = UTF8String.fromString(s);
            integer = 0;
        }

        public Constant(int i) {
            super(DataTypes.IntegerType);
            string = null;
            integer = i;
        }

        @Override
        public int getInt(int rowId) {
            return integer;
        }

        @Override
        public UTF8String getUTF8String(int rowId) {
            return string;
        }
    }

    /** headers array<struct<key: string, value: binary>>: null for a record without headers. */
    public static final class Headers extends Base {
        private final int[] start;
        private final boolean[] nulls;
        private final int nullCount;
        private final Entries entries;

        public Headers(DataType type, RecordColumns c) {
            super(type);
            start = c.headerStart;
            nulls = new boolean[c.rows];
            int k = 0;
            for (int i = 0; i < c.rows; i++) {
                nulls[i] = start[i + 1] == start[i];
                k += nulls[i] ? 1 : 0;
            }
            nullCount = k;
            StructType st = (StructType) ((ArrayType) type).elementType();
            entries = new Entries(st, new Binaries(DataTypes.StringType, c.headerKeys),
                    new Binaries(DataTypes.BinaryType, c.headerValues));
        }

        @Override
        public int numNulls() {
            return nullCount;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return nulls[rowId];
        }

        @Override
        public ColumnarArray getArray(int rowId) {
            if (nulls[rowId]) {
                return null;
            }
            return new ColumnarArray(entries, start[rowId], start[rowId + 1] - start[rowId]);
        }
    }

    /** The struct<key, value> elements of every row's headers. */
    static final class Entries extends Base {
        private final ColumnVector[] children;

        Entries(StructType type, ColumnVector key, ColumnVector value) {
            super(type);
            children = new ColumnVector[] {key, value};
        }

        @Override
        public ColumnVector getChild(int ordinal) {
            return children[ordinal];
        }
    }
}
