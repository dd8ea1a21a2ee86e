// SPDX-License-Identifier: GPL-3.0-or-later
// File → Import tensors…: header preview, K/V/Q choice, slice and ranges, validated as the user types.
#include "widgets/import_dialog.h"

#include "core/io/tensor_file.h"
#include "core/regimes/regime.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace kvlens::widgets {

namespace {

QString shapeText(const QList<qint64>& shape)
{
    QStringList parts;
    for (qint64 s : shape)
        parts << QString::number(s);
    return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

QSpinBox* spin(int minimum, int maximum, int value, const QString& tooltip, QWidget* parent)
{
    auto* box = new QSpinBox(parent);
    box->setRange(minimum, maximum);
    box->setValue(value);
    box->setToolTip(tooltip);
    return box;
}

/// Index of the name that looks like `role` ("k": k, key, keys, k_proj...), or `fallback`.
int pick(const QStringList& names, const QStringList& candidates, int fallback)
{
    for (const QString& want : candidates)
        for (int i = 0; i < names.size(); ++i) {
            const QString base = QFileInfo(names[i]).completeBaseName().toLower();
            if (base == want || base.endsWith(QLatin1Char('_') + want) || base.endsWith(QLatin1Char('.') + want))
                return i;
        }
    return std::min(fallback, static_cast<int>(names.size()) - 1);
}

} // namespace

ImportDialog::ImportDialog(ExperimentSpec base, QString folder, QWidget* parent)
    : QDialog(parent), m_base(std::move(base)), m_folder(std::move(folder))
{
    setWindowTitle(QStringLiteral("Import tensors"));
    auto* layout = new QVBoxLayout(this);

    auto* fileRow = new QHBoxLayout;
    m_file = new QLineEdit(this);
    m_file->setReadOnly(true);
    m_file->setPlaceholderText(QStringLiteral("a .npy, .npz or .safetensors file"));
    auto* browseButton = new QPushButton(QStringLiteral("Browse…"), this);
    fileRow->addWidget(new QLabel(QStringLiteral("File:"), this));
    fileRow->addWidget(m_file, 1);
    fileRow->addWidget(browseButton);
    layout->addLayout(fileRow);
    connect(browseButton, &QPushButton::clicked, this, &ImportDialog::browse);

    m_table = new QTableWidget(0, 4, this);
    m_table->setHorizontalHeaderLabels({QStringLiteral("tensor"), QStringLiteral("dtype"), QStringLiteral("shape"),
                                        QStringLiteral("MiB as float32")});
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionMode(QAbstractItemView::NoSelection);
    m_table->setToolTip(QStringLiteral("What the file's headers say; no tensor data is read until the run."));
    m_table->setMinimumHeight(120);
    layout->addWidget(m_table);

    auto* form = new QFormLayout;
    m_k = new QComboBox(this);
    m_v = new QComboBox(this);
    m_q = new QComboBox(this);
    m_k->setToolTip(QStringLiteral("Keys, laid out [..., heads, tokens, head_dim]."));
    m_v->setToolTip(QStringLiteral("Values, with as many tokens as the keys."));
    m_q->setToolTip(QStringLiteral("Queries, with the keys' head dimension."));
    form->addRow(QStringLiteral("K tensor"), m_k);
    form->addRow(QStringLiteral("V tensor"), m_v);
    form->addRow(QStringLiteral("Q tensor"), m_q);
    m_head = spin(0, 1 << 20, 0, QStringLiteral("Index on the head axis (third from last) of K and V."), this);
    m_qHead = spin(-1, 1 << 20, -1,
                   QStringLiteral("Head of Q when it differs (grouped-query attention); -1: the same as K's."), this);
    m_qHead->setSpecialValueText(QStringLiteral("same as K"));
    m_batch = spin(0, 1 << 20, 0, QStringLiteral("Index on the batch axis (fourth from last)."), this);
    m_layer = spin(0, 1 << 20, 0, QStringLiteral("Index on the layer axis (fifth from last)."), this);
    m_tokenStart = spin(0, 1 << 30, 0, QStringLiteral("First key/value token scored."), this);
    m_tokens = spin(1, 1 << 30, 1, QStringLiteral("Keys and values scored (N)."), this);
    m_queryStart = spin(0, 1 << 30, 0, QStringLiteral("First query row used."), this);
    m_queries = spin(1, 1 << 30, 1, QStringLiteral("Queries used (Q)."), this);
    form->addRow(QStringLiteral("head"), m_head);
    form->addRow(QStringLiteral("query head"), m_qHead);
    form->addRow(QStringLiteral("batch"), m_batch);
    form->addRow(QStringLiteral("layer"), m_layer);
    form->addRow(QStringLiteral("first token"), m_tokenStart);
    form->addRow(QStringLiteral("tokens"), m_tokens);
    form->addRow(QStringLiteral("first query"), m_queryStart);
    form->addRow(QStringLiteral("queries"), m_queries);
    layout->addLayout(form);

    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_status);

    m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    m_buttons->button(QDialogButtonBox::Ok)->setText(QStringLiteral("Import and run"));
    layout->addWidget(m_buttons);
    connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    for (QComboBox* box : {m_k, m_v, m_q})
        connect(box, &QComboBox::currentIndexChanged, this, [this] {
            updateRanges();
            revalidate();
        });
    for (QSpinBox* box : {m_head, m_qHead, m_batch, m_layer, m_tokenStart, m_tokens, m_queryStart, m_queries})
        connect(box, &QSpinBox::valueChanged, this, &ImportDialog::revalidate);
    revalidate();
    resize(620, 640);
}

void ImportDialog::browse()
{
    const QString start = m_path.isEmpty() ? m_folder : QFileInfo(m_path).absolutePath();
    const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Import tensors"), start,
                                                      QStringLiteral("Tensors (*.npy *.npz *.safetensors)"));
    if (!path.isEmpty())
        setFile(path);
}

void ImportDialog::setFile(const QString& path)
{
    m_path = QFileInfo(path).absoluteFilePath();
    m_file->setText(m_path);
    m_names.clear();
    m_shapes.clear();
    m_table->setRowCount(0);
    m_npyFolder = m_path.endsWith(QLatin1String(".npy"), Qt::CaseInsensitive);

    // A .npy holds one array: offer every .npy of its folder, so K, V and Q can each be a file.
    QStringList files = {m_path};
    if (m_npyFolder) {
        files.clear();
        const QDir dir = QFileInfo(m_path).absoluteDir();
        for (const QString& name : dir.entryList({QStringLiteral("*.npy")}, QDir::Files, QDir::Name))
            files << dir.absoluteFilePath(name);
    }
    QStringList problems;
    for (const QString& file : files) {
        const auto info = io::inspectTensorFile(file.toStdString());
        if (!info) {
            problems << QString::fromStdString(info.error().text());
            continue;
        }
        for (const io::TensorInfo& t : info->tensors) {
            QList<qint64> shape(t.shape.begin(), t.shape.end());
            const QString name = m_npyFolder ? file : QString::fromStdString(t.name);
            m_names << name;
            m_shapes << shape;
            const int row = m_table->rowCount();
            m_table->insertRow(row);
            m_table->setItem(row, 0, new QTableWidgetItem(m_npyFolder ? QFileInfo(file).fileName() : name));
            m_table->setItem(row, 1, new QTableWidgetItem(QString::fromUtf8(io::dtypeName(t.dtype).data())));
            m_table->setItem(row, 2, new QTableWidgetItem(shapeText(shape)));
            m_table->setItem(row, 3, new QTableWidgetItem(
                                         QString::number(static_cast<double>(t.elementCount()) * 4.0 / 1048576.0, 'g', 4)));
        }
    }
    m_table->resizeColumnsToContents();

    const QStringList labels = [&] {
        QStringList out;
        for (const QString& n : m_names)
            out << (m_npyFolder ? QFileInfo(n).fileName() : n);
        return out;
    }();
    for (QComboBox* box : {m_k, m_v, m_q}) {
        const QSignalBlocker block(box);
        box->clear();
        box->addItems(labels);
    }
    {
        const QSignalBlocker bk(m_k), bv(m_v), bq(m_q);
        m_k->setCurrentIndex(pick(m_names, {QStringLiteral("k"), QStringLiteral("key"), QStringLiteral("keys")}, 0));
        m_v->setCurrentIndex(pick(m_names, {QStringLiteral("v"), QStringLiteral("value"), QStringLiteral("values")}, 1));
        m_q->setCurrentIndex(pick(m_names, {QStringLiteral("q"), QStringLiteral("query"), QStringLiteral("queries")}, 2));
    }
    // Sensible ranges: the last quarter of the query rows (at most 64) attends to the keys before it.
    const int k = m_k->currentIndex(), q = m_q->currentIndex();
    if (k >= 0 && q >= 0 && m_shapes[k].size() >= 2 && m_shapes[q].size() >= 2) {
        const int keyRows = static_cast<int>(m_shapes[k][m_shapes[k].size() - 2]);
        const int queryRows = static_cast<int>(m_shapes[q][m_shapes[q].size() - 2]);
        const int queries = std::clamp(queryRows / 4, 1, 64);
        const QSignalBlocker b1(m_queries), b2(m_queryStart), b3(m_tokens), b4(m_tokenStart);
        m_queries->setValue(queries);
        m_queryStart->setValue(std::max(0, queryRows - queries));
        m_tokenStart->setValue(0);
        m_tokens->setValue(std::max(1, queryRows == keyRows ? keyRows - queries : keyRows));
    }
    updateRanges();
    revalidate();
    if (!problems.isEmpty() && m_names.isEmpty())
        m_status->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(problems.join(QStringLiteral("<br>")).toHtmlEscaped()));
}

void ImportDialog::updateRanges()
{
    const int k = m_k->currentIndex();
    if (k < 0 || k >= m_shapes.size())
        return;
    const QList<qint64>& shape = m_shapes[k];
    const int rank = static_cast<int>(shape.size());
    // Axes the tensor does not have stay at 0 and are disabled.
    m_head->setEnabled(rank >= 3);
    m_batch->setEnabled(rank >= 4);
    m_layer->setEnabled(rank >= 5);
    m_qHead->setEnabled(rank >= 3);
}

std::string ImportDialog::sourceOf(const QComboBox* box) const
{
    const int i = box->currentIndex();
    return i >= 0 && i < m_names.size() ? m_names[i].toStdString() : std::string();
}

ExperimentSpec ImportDialog::spec() const
{
    ExperimentSpec s = m_base;
    s.regime = "imported";
    s.sweep.clear();
    RegimeParams p;
    p["file"] = m_npyFolder ? std::string() : m_path.toStdString();
    p["k"] = sourceOf(m_k);
    p["v"] = sourceOf(m_v);
    p["q"] = sourceOf(m_q);
    p["head"] = static_cast<double>(m_head->isEnabled() ? m_head->value() : 0);
    p["q_head"] = static_cast<double>(m_qHead->isEnabled() ? m_qHead->value() : -1);
    p["batch"] = static_cast<double>(m_batch->isEnabled() ? m_batch->value() : 0);
    p["layer"] = static_cast<double>(m_layer->isEnabled() ? m_layer->value() : 0);
    p["token_start"] = static_cast<double>(m_tokenStart->value());
    p["query_start"] = static_cast<double>(m_queryStart->value());
    s.regimeParams = std::move(p);
    const int k = m_k->currentIndex();
    if (k >= 0 && k < m_shapes.size() && !m_shapes[k].isEmpty())
        s.d = static_cast<int>(m_shapes[k].back());
    s.tokens = m_tokens->value();
    s.queries = m_queries->value();
    s.metrics.topK = std::min(s.metrics.topK, s.tokens); // a short import must not trip over recall@k
    if (s.name.empty() || s.name == m_base.name)
        s.name = "imported: " + QFileInfo(m_path).fileName().toStdString();
    const auto normalized = normalizeSpec(s);
    return normalized ? *normalized : s;
}

QString ImportDialog::message() const
{
    return m_status->text();
}

QComboBox* ImportDialog::tensorBox(int which) const
{
    return which == 0 ? m_k : which == 1 ? m_v : m_q;
}

void ImportDialog::revalidate()
{
    QPushButton* ok = m_buttons->button(QDialogButtonBox::Ok);
    if (m_names.isEmpty()) {
        m_valid = false;
        ok->setEnabled(false);
        m_status->setText(QStringLiteral("Choose a file."));
        return;
    }
    const ExperimentSpec candidate = spec();
    const auto normalized = normalizeSpec(candidate);
    m_valid = normalized.ok();
    ok->setEnabled(m_valid);
    if (!m_valid) {
        m_status->setText(QStringLiteral("<span style='color:#b00020'>%1</span>")
                              .arg(QString::fromStdString(normalized.error().text()).toHtmlEscaped()));
        return;
    }
    m_status->setText(QStringLiteral("<span style='color:#1b5e20'>d = %1, tokens %2..%3, queries %4..%5: ready.</span>")
                          .arg(normalized->d)
                          .arg(m_tokenStart->value())
                          .arg(m_tokenStart->value() + normalized->tokens - 1)
                          .arg(m_queryStart->value())
                          .arg(m_queryStart->value() + normalized->queries - 1));
}

} // namespace kvlens::widgets
